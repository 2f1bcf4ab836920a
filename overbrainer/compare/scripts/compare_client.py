"""Ask the child served by llama-server the questions of a compare, one at a time, streamed.

Runs on the target, next to compare.sh which started the server; needs the python3 standard
library only.

    python3 compare_client.py --port P --server-pid PID --build NAME

Files (in the working directory):
  questions.jsonl       input: one `{"id": ..., "messages": [...]}` per line
  child_answers.jsonl   output: one flushed line per question,
                        `{id, answer, finish, input_tokens, output_tokens, seconds,
                        first_token_seconds, tokens_per_second}` or `{id, error}`; a question
                        already answered there (without an error) is not asked again
  hardware.json         output: `{build, gpus, cpu}`
  server.log            llama-server's output; its last 20 lines go to stderr when it fails

Environment: OVERBRAINER_COMPARE_MAX_TOKENS, _TEMPERATURE, _START_SECS (how long the server may
take to answer `GET /health` with 200), OVERBRAINER_METRICS (progress lines appended:
`{"event":"eval","step":i,"total":n,"time":t}`, the first when the server is ready).

Exit status: 0 when every question has a line (a failed request is an `{id, error}` line);
1 when the server died or never became ready (the last 20 lines of server.log, then the reason
as the last line of stderr), or an input is unreadable.
"""

import argparse
import http.client
import json
import os
import platform
import subprocess
import sys
import time

QUESTIONS = "questions.jsonl"
ANSWERS = "child_answers.jsonl"
HARDWARE = "hardware.json"
SERVER_LOG = "server.log"
REQUEST_TIMEOUT = 600.0


class ServerGone(Exception):
    """llama-server is not there any more (or never became ready): the job fails."""


def env_number(name, kind, default):
    raw = os.environ.get(name, "")
    if raw == "":
        return default
    try:
        return kind(raw)
    except ValueError:
        raise SystemExit(f"compare: {name}={raw!r} is not a number") from None


def log_tail(lines=20):
    try:
        with open(SERVER_LOG, "rb") as fh:
            text = fh.read().decode("utf-8", "replace")
    except OSError:
        return "(no server.log)"
    return "\n".join(text.splitlines()[-lines:]) or "(server.log is empty)"


def alive(pid):
    """Whether process `pid` still runs (a zombie, dead but not yet reaped, does not)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            state = fh.read().rsplit(b")", 1)[1].split()[0]
        return state not in (b"Z", b"X")
    except (OSError, IndexError):
        pass
    try:
        out = subprocess.run(["ps", "-o", "stat=", "-p", str(pid)], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return True
    return out.returncode == 0 and not out.stdout.strip().startswith("Z")


def command_lines(args):
    try:
        out = subprocess.run(args, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    if out.returncode != 0:
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()]


def gpu_names():
    names = command_lines(["nvidia-smi", "--query-gpu=name", "--format=csv,noheader"])
    if names:
        return names
    found = []
    for line in command_lines(["rocm-smi", "--showproductname", "--csv"])[1:]:
        cells = [c.strip() for c in line.split(",")]
        if len(cells) > 1 and cells[1]:
            found.append(cells[1])
    return found


def cpu_name():
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as fh:
            for line in fh:
                key, _, value = line.partition(":")
                if key.strip() in ("model name", "Model", "Hardware") and value.strip():
                    return value.strip()
    except OSError:
        pass
    brand = command_lines(["sysctl", "-n", "machdep.cpu.brand_string"])
    return brand[0] if brand else (platform.processor() or platform.machine() or None)


def hardware(build):
    """hardware.json: the build's name, the GPUs' and the CPU's."""
    return {"build": build, "gpus": gpu_names(), "cpu": cpu_name()}


def write_json(path, doc):
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(doc) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


class Metrics:
    def __init__(self, path):
        self.path = path or None

    def write(self, **rec):
        if self.path is None:
            return
        rec["time"] = time.time()
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(rec) + "\n")
            fh.flush()


def wait_ready(port, pid, start_secs):
    deadline = time.monotonic() + start_secs
    while True:
        if not alive(pid):
            raise ServerGone("llama-server exited before it was ready")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=5)
            try:
                conn.request("GET", "/health")
                if conn.getresponse().status == 200:
                    return
            finally:
                conn.close()
        except (OSError, http.client.HTTPException):
            pass
        if time.monotonic() >= deadline:
            raise ServerGone(f"llama-server was not ready within {start_secs:g} s")
        time.sleep(0.2)


def read_jsonl(path):
    out = []
    try:
        with open(path, encoding="utf-8") as fh:
            for n, line in enumerate(fh, 1):
                if not line.strip():
                    continue
                try:
                    out.append(json.loads(line))
                except ValueError:
                    if path == ANSWERS:
                        continue  # a line cut by a crash: that question is asked again
                    raise SystemExit(f"compare: {path}:{n} is not valid JSON") from None
    except FileNotFoundError:
        if path == ANSWERS:
            return []
        raise SystemExit(f"compare: {path} is missing") from None
    return out


def ends_a_line(path):
    with open(path, "rb") as fh:
        if fh.seek(0, os.SEEK_END) == 0:
            return True
        fh.seek(-1, os.SEEK_END)
        return fh.read(1) == b"\n"


def number(value):
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def ask(port, question, max_tokens, temperature):
    """One streamed chat request: the answer line of the question (raises OSError and
    http.client.HTTPException on a broken connection, ValueError on a bad reply)."""
    body = json.dumps({"messages": question["messages"], "max_tokens": max_tokens,
                       "temperature": temperature, "stream": True,
                       "stream_options": {"include_usage": True}}).encode("utf-8")
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=REQUEST_TIMEOUT)
    start = time.monotonic()
    try:
        conn.request("POST", "/v1/chat/completions", body=body,
                     headers={"Content-Type": "application/json", "Accept": "text/event-stream"})
        resp = conn.getresponse()
        if resp.status != 200:
            return {"id": question["id"], "error": http_error(resp)}
        stream = read_stream(resp, start)
        seconds = time.monotonic() - start
    finally:
        conn.close()
    if stream["error"] is not None:
        return {"id": question["id"], "error": stream["error"]}
    return answer_line(question["id"], stream, seconds)


def http_error(resp):
    """A refused request in one line: the server's error message, else its body."""
    text = resp.read(4000).decode("utf-8", "replace")
    try:
        detail = json.loads(text)["error"]["message"]
    except (ValueError, KeyError, TypeError):
        detail = text
    detail = " ".join(str(detail).split())[:300]
    return f"HTTP {resp.status} from llama-server: {detail}"


def read_stream(resp, start):
    """The server-sent events of one answer: its parts, finish reason, usage and timings, when
    the first token came (seconds after `start`), or the error the stream reported."""
    got = {"parts": [], "finish": None, "usage": None, "timings": None, "first": None, "error": None}
    for raw in resp:
        line = raw.decode("utf-8", "replace").strip()
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if chunk.get("error"):
            message = chunk["error"].get("message") if isinstance(chunk["error"], dict) else chunk["error"]
            got["error"] = " ".join(f"llama-server: {message}".split())[:300]
            return got
        got["usage"] = chunk.get("usage") or got["usage"]
        got["timings"] = chunk.get("timings") or got["timings"]
        for choice in chunk.get("choices") or []:
            delta = choice.get("delta") or {}
            content = delta.get("content")
            if got["first"] is None and (content or delta.get("reasoning_content")):
                got["first"] = time.monotonic() - start
            if content:
                got["parts"].append(content)
            if choice.get("finish_reason"):
                got["finish"] = choice["finish_reason"]
    return got


def answer_line(question_id, stream, seconds):
    """The answer line: the text, tokens in and out (from usage, else llama.cpp's timings), and
    the speed after the first token."""
    usage = stream["usage"] if isinstance(stream["usage"], dict) else {}
    timings = stream["timings"] if isinstance(stream["timings"], dict) else {}
    first = stream["first"]
    tokens_in = number(usage.get("prompt_tokens"))
    tokens_out = number(usage.get("completion_tokens"))
    if tokens_in is None:
        tokens_in = number(timings.get("prompt_n"))
    if tokens_out is None:
        tokens_out = number(timings.get("predicted_n"))
    rate = None
    if tokens_out is not None and first is not None and seconds - first > 0:
        rate = tokens_out / (seconds - first)
    return {"id": question_id, "answer": "".join(stream["parts"]), "finish": stream["finish"],
            "input_tokens": tokens_in, "output_tokens": tokens_out, "seconds": round(seconds, 4),
            "first_token_seconds": None if first is None else round(first, 4),
            "tokens_per_second": None if rate is None else round(rate, 3)}


def run(args):
    max_tokens = env_number("OVERBRAINER_COMPARE_MAX_TOKENS", int, 4096)
    temperature = env_number("OVERBRAINER_COMPARE_TEMPERATURE", float, 0.0)
    start_secs = env_number("OVERBRAINER_COMPARE_START_SECS", float, 300.0)
    metrics = Metrics(os.environ.get("OVERBRAINER_METRICS"))
    questions = read_jsonl(QUESTIONS)
    for n, q in enumerate(questions, 1):
        if not isinstance(q, dict) or not isinstance(q.get("id"), str) or not isinstance(q.get("messages"), list):
            raise SystemExit(f"compare: {QUESTIONS}:{n} needs an `id` and `messages`")
    answered = {a.get("id") for a in read_jsonl(ANSWERS) if isinstance(a, dict) and a.get("error") is None}
    write_json(HARDWARE, hardware(args.build))
    wait_ready(args.port, args.server_pid, start_secs)
    total = len(questions)
    done = sum(1 for q in questions if q["id"] in answered)
    metrics.write(event="eval", step=done, total=total)
    with open(ANSWERS, "a", encoding="utf-8") as out:
        if not ends_a_line(ANSWERS):  # a line cut by a crash: end it, so the next one stands alone
            out.write("\n")
        for q in questions:
            if q["id"] in answered:
                continue
            try:
                line = ask(args.port, q, max_tokens, temperature)
            except (OSError, http.client.HTTPException, ValueError, AttributeError) as e:
                if not alive(args.server_pid):
                    raise ServerGone(f"llama-server died while answering {q['id']}") from e
                line = {"id": q["id"], "error": " ".join(f"request failed: {e}".split())[:300]}
            out.write(json.dumps(line, ensure_ascii=False) + "\n")
            out.flush()
            os.fsync(out.fileno())
            answered.add(q["id"])
            done += 1
            metrics.write(event="eval", step=done, total=total)
    print(f"compare: {total} questions answered", file=sys.stderr)


def client_args(description):
    """The arguments compare.sh gives its client (this one, or eval_client.py)."""
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--server-pid", type=int, required=True)
    parser.add_argument("--build", default="unknown")
    return parser.parse_args()


def exit_server_gone(label, error):
    """The server is gone: the last lines of its log, then why, as the last line; exit 1."""
    print(f"{label}: server.log ends with:\n{log_tail()}\n{label}: {error}", file=sys.stderr)
    sys.exit(1)


def main():
    args = client_args("Ask llama-server the questions of a compare.")
    try:
        run(args)
    except ServerGone as e:
        exit_server_gone("compare", e)


if __name__ == "__main__":
    main()
