"""The SSH test fixture finds OpenSSH where Debian puts it, names the install line when it is missing,
and marks every test that needs it."""

from __future__ import annotations

import stat

import pytest

from tests.fixtures.sshd import INSTALL_LINE, find_tool, mark_ssh_tests


def _exe(path):
    path.write_text("#!/bin/sh\n")
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_find_tool_prefers_path_then_the_sbin_folders(tmp_path):
    on_path, sbin = tmp_path / "bin", tmp_path / "sbin"
    on_path.mkdir(), sbin.mkdir()
    _exe(sbin / "sshd")
    assert find_tool("sshd", path=str(on_path), extra_dirs=(str(sbin),)) == str(sbin / "sshd")
    _exe(on_path / "sshd")
    assert find_tool("sshd", path=str(on_path), extra_dirs=(str(sbin),)) == str(on_path / "sshd")


def test_find_tool_missing_names_the_install_line(tmp_path):
    (tmp_path / "sshd").write_text("not executable")
    with pytest.raises(RuntimeError) as e:
        find_tool("sshd", path=str(tmp_path), extra_dirs=(str(tmp_path),))
    assert INSTALL_LINE in str(e.value) and 'pytest -m "not ssh"' in str(e.value)
    assert INSTALL_LINE == "apt-get install -y openssh-server openssh-client"


class _Item:
    def __init__(self, fixturenames, params=None):
        self.fixturenames = fixturenames
        self.callspec = type("C", (), {"params": params})() if params is not None else None
        self.markers = []

    def get_closest_marker(self, name):
        return next((m for m in self.markers if m.name == name), None)

    def add_marker(self, mark):
        self.markers.append(mark.mark)


def test_every_test_that_needs_sshd_is_marked():
    direct, via_executor, local_executor, plain = (
        _Item(["sshd", "tmp_path"]), _Item(["executor"], {"executor": "ssh"}),
        _Item(["executor"], {"executor": "local"}), _Item(["tmp_path"]))
    assert mark_ssh_tests([direct, via_executor, local_executor, plain]) == 2
    assert [m.name for m in direct.markers] == ["ssh"] and [m.name for m in via_executor.markers] == ["ssh"]
    assert local_executor.markers == [] and plain.markers == []

