"""The GPU pick: a listed walk, or "auto" from one catalog read filtered, ranked and explained."""

from __future__ import annotations

import pytest

from overbrainer.runpod.catalog import Candidate, NotInStock, Wanted, for_listing, pick
from overbrainer.runpod.objects import GpuType, parse_gpu

# A `GET /catalog/gpus?include=AVAILABILITY&product=POD&cloud=SECURE&count=1` answer (v2 shape).
ANSWER = {"gpus": [
    {"id": "NVIDIA H100 80GB HBM3", "name": "H100", "manufacturer": "NVIDIA", "memory": 80, "secure": True,
     "community": False, "price": {"secure": 2.69, "community": None}, "maxCount": {"secure": 8, "community": 0},
     "availability": "HIGH",
     "dataCenters": [{"id": "US-KS-2", "name": "Kansas", "availability": "HIGH"},
                     {"id": "EU-RO-1", "name": "Romania", "availability": "NONE"}]},
    {"id": "NVIDIA A40", "memory": 48, "secure": True, "price": {"secure": 0.44}, "maxCount": {"secure": 8},
     "availability": "LOW", "dataCenters": [{"id": "EU-RO-1", "availability": "LOW"},
                                            {"id": "US-KS-2", "availability": "NONE"}]},
    {"id": "NVIDIA L40S", "memory": 48, "secure": True, "price": {"secure": 0.86}, "maxCount": {"secure": 4},
     "availability": "MEDIUM", "dataCenters": [{"id": "US-KS-2", "availability": "MEDIUM"},
                                               {"id": "EU-RO-1", "availability": "LOW"}]},
    {"id": "NVIDIA RTX 6000 Ada\x1b[31m", "memory": 48, "secure": True, "price": {"secure": 0.86},
     "maxCount": {"secure": 2}, "availability": "LOW", "dataCenters": [{"id": "EU-RO-1", "availability": "LOW"}]},
    {"id": "NVIDIA RTX A4000", "memory": 16, "secure": True, "price": {"secure": 0.17}, "maxCount": {"secure": 8},
     "availability": "HIGH"},
    {"id": "NVIDIA B200", "memory": 180, "secure": True, "price": {"secure": 5.99}, "maxCount": {"secure": 8},
     "availability": "NONE"},
    {"id": "NVIDIA RTX 3090", "memory": 24, "secure": False, "price": {"secure": 0.0, "community": 0.22},
     "maxCount": {"secure": 0, "community": 2}, "availability": "HIGH"},
    {"id": None, "memory": 1},
    "junk",
]}


def parse_catalog(answer) -> list[GpuType]:
    """What `RunpodClient.gpu_types` does with the answer (its one parser)."""
    return [g for g in map(parse_gpu, answer["gpus"]) if g is not None]


CATALOG = parse_catalog(ANSWER)


def ids(candidates: list[Candidate]) -> list[str]:
    return [c.gpu_type for c in candidates]


def test_the_catalog_answer_is_read_with_nulls_tolerated_and_strings_cleaned():
    assert len(CATALOG) == 7
    ada = next(g for g in CATALOG if g.id.startswith("NVIDIA RTX 6000"))
    assert ada.id == "NVIDIA RTX 6000 Ada"  # escape sequence removed
    a40 = next(g for g in CATALOG if g.id == "NVIDIA A40")
    assert a40 == GpuType("NVIDIA A40", None, 48.0, True, 0.44, 8, "LOW", (("EU-RO-1", "LOW"), ("US-KS-2", "NONE")))
    assert a40.stock_dcs() == ["EU-RO-1"] and a40.stock_at("US-KS-2") == "NONE" and a40.stock_at("X") == "NONE"
    assert parse_catalog({"gpus": []}) == []


def test_a_type_without_secure_true_or_with_a_zero_price_is_not_picked_nor_listed():
    """One parser decides for the pick and `pod gpus` alike: a missing `secure` is not Secure Cloud
    (the schema's boolean, only `true` offers it) and a $0 price is no price."""
    entry = {"memory": 48, "maxCount": {"secure": 8}, "availability": "HIGH"}
    odd = parse_catalog({"gpus": [
        {"id": "No Secure Flag", "price": {"secure": 0.30}, **entry},
        {"id": "Free Of Charge", "secure": True, "price": {"secure": 0}, **entry},
        {"id": "Negative", "secure": True, "price": {"secure": -1.0}, **entry},
        {"id": "Fine", "secure": True, "price": {"secure": 0.50}, **entry}]})
    by_id = {g.id: g for g in odd}
    assert not by_id["No Secure Flag"].secure and by_id["No Secure Flag"].price_per_hour == 0.30
    assert by_id["Free Of Charge"].price_per_hour is None and by_id["Negative"].price_per_hour is None
    assert ids(pick(Wanted(gpu_types="auto"), odd)) == ["Fine"]
    with pytest.raises(NotInStock, match=r"of 3 types, 3 not offered on Secure Cloud"):
        pick(Wanted(gpu_types="auto"), odd[:3])
    assert [g.id for g in for_listing(odd)] == ["Fine", "Free Of Charge", "Negative"]  # no price: listed last
    assert [g.id for g in for_listing(odd, max_price=1.0)] == ["Fine"]


def test_a_listed_gpu_types_is_walked_in_order_without_the_catalog():
    w = Wanted(gpu_types=["NVIDIA L40S", "NVIDIA A40"], data_center_ids=["EU-RO-1"])
    assert not w.needs_catalog
    assert pick(w) == [Candidate("NVIDIA L40S", data_center_ids=("EU-RO-1",)),
                       Candidate("NVIDIA A40", data_center_ids=("EU-RO-1",))]
    assert ids(pick(w, tried=["NVIDIA L40S"])) == ["NVIDIA A40"]


def test_auto_keeps_secure_priced_in_stock_types_cheapest_first_then_more_vram_then_id():
    picked = pick(Wanted(gpu_types="auto"), CATALOG)
    # A4000 0.17, A40 0.44, the two 48 GB types at 0.86 by id, H100 2.69; B200 out of stock,
    # RTX 3090 not on Secure Cloud.
    assert ids(picked) == ["NVIDIA RTX A4000", "NVIDIA A40", "NVIDIA L40S", "NVIDIA RTX 6000 Ada",
                           "NVIDIA H100 80GB HBM3"]
    assert picked[1] == Candidate("NVIDIA A40", 0.44, 48.0, ())


def test_auto_applies_vram_price_and_count_limits():
    w = Wanted(gpu_types="auto", gpu_count=4, min_vram_gb=40, max_price_per_hour=4.0)
    # 4 × L40S = 3.44 fits; 4 × A40 = 1.76 fits; 4 GPUs rule out the RTX 6000 Ada (max 2);
    # 4 × H100 = 10.76 is above the price.
    assert ids(pick(w, CATALOG)) == ["NVIDIA A40", "NVIDIA L40S"]


def test_listed_data_centers_scope_the_stock_and_are_sent_as_given():
    w = Wanted(gpu_types="auto", min_vram_gb=40, data_center_ids=["US-KS-2"])
    picked = pick(w, CATALOG)
    assert ids(picked) == ["NVIDIA L40S", "NVIDIA H100 80GB HBM3"]  # A40 has no stock in US-KS-2
    assert {c.data_center_ids for c in picked} == {("US-KS-2",)}


def test_auto_data_centers_are_those_where_each_type_is_in_stock_cheapest_first():
    picked = pick(Wanted(gpu_types="auto", min_vram_gb=40, data_center_ids="auto"), CATALOG)
    by_id = {c.gpu_type: c.data_center_ids for c in picked}
    # EU-RO-1 ranks first (A40, the cheapest in stock, is there), then US-KS-2.
    assert by_id["NVIDIA L40S"] == ("EU-RO-1", "US-KS-2")
    assert by_id["NVIDIA H100 80GB HBM3"] == ("US-KS-2",)
    listed = pick(Wanted(gpu_types=["NVIDIA A40", "Unknown GPU"], data_center_ids="auto"), CATALOG)
    assert listed == [Candidate("NVIDIA A40", 0.44, 48.0, ("EU-RO-1",)), Candidate("Unknown GPU")]


def test_nothing_in_stock_says_why_before_any_pod():
    w = Wanted(gpu_types="auto", gpu_count=2, min_vram_gb=48, max_price_per_hour=0.8)
    with pytest.raises(NotInStock) as e:
        pick(w, CATALOG)
    assert str(e.value) == (
        'no GPU type in stock on Runpod\'s Secure Cloud for gpu_types = "auto" (gpu_count = 2, '
        "min_vram_gb = 48, max_price_per_hour = 0.8): of 7 types, 1 not offered on Secure Cloud; "
        "1 less VRAM than min_vram_gb; 5 above max_price_per_hour (the list price times gpu_count)")
    with pytest.raises(NotInStock, match=r"of 7 types, 1 not offered on Secure Cloud; 1 with fewer than 3 GPUs "
                                         r"per pod; 4 less VRAM than min_vram_gb; 1 out of stock$"):
        pick(Wanted(gpu_types="auto", gpu_count=3, min_vram_gb=81), CATALOG)
    with pytest.raises(NotInStock, match=r": the catalog lists no GPU type$"):
        pick(Wanted(gpu_types="auto"), [])
    with pytest.raises(NotInStock, match=r"\(5 tried already\)$"):
        pick(Wanted(gpu_types="auto", min_vram_gb=16), CATALOG,
             tried=[c.gpu_type for c in pick(Wanted(gpu_types="auto", min_vram_gb=16), CATALOG)])


def test_listed_types_with_auto_data_centers_need_stock_somewhere():
    with pytest.raises(NotInStock) as e:
        pick(Wanted(gpu_types=["NVIDIA B200", "NVIDIA RTX A4000"], data_center_ids="auto"), CATALOG)
    assert str(e.value) == ('no data center has NVIDIA B200 or NVIDIA RTX A4000 in stock for '
                            'data_center_ids = "auto" (gpu_count = 1)')
    with pytest.raises(ValueError):
        pick(Wanted(gpu_types="auto"))  # auto needs the catalog


def test_pod_gpus_lists_secure_types_cheapest_first_with_filters():
    assert [g.id for g in for_listing(CATALOG, min_vram_gb=48, max_price=1.0)] == [
        "NVIDIA A40", "NVIDIA L40S", "NVIDIA RTX 6000 Ada"]
    assert [g.id for g in for_listing(CATALOG, in_stock=True, data_center="US-KS-2")] == [
        "NVIDIA L40S", "NVIDIA H100 80GB HBM3"]
    assert "NVIDIA B200" in [g.id for g in for_listing(CATALOG)]
    assert "NVIDIA B200" not in [g.id for g in for_listing(CATALOG, in_stock=True)]
