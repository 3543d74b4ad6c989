"""Ctrl-C at seeded random points of a get, a put and a copy, each into a
target that already holds other bytes (docs/THIRDPARTY.md, "Faults and
resume"; docs/SECURITY.md, "No data lost"):

- the target is untouched or complete, never partial under its name;
- what stays is what --continue needs (a part file, a -P run's ranges),
  never a ``.ranges.tmp``, and nothing keeps moving once the client exits;
- --continue then completes it byte for byte and leaves nothing behind.

The servers move at most RATE bytes a second (tests/slowserve.py --both), so
an interrupt can land anywhere from the log-in to the last byte."""

from __future__ import annotations

import os
import random
import signal
import subprocess
import time

import pytest
from conftest import PASSWORD, PY, USER, ServerProcess, make_file, sha256_file, wait_until

HERE = os.path.dirname(os.path.abspath(__file__))
MiB = 1 << 20
SIZE = 2 * MiB + 17
RATE = 1_000_000  # B/s each way, in bursts of that much a second: a transfer takes about two seconds
OLD = b"the target's bytes before the run\n"
ROUNDS = 3  # per kind: 9 interrupted runs in all


def throttled(root):
    return ServerProcess(root, cmd=[PY, os.path.join(HERE, "slowserve.py"), str(root), str(RATE), USER,
                                    PASSWORD, "--both"])


def default_sigint():
    """Python's own SIGINT in the child, also under nohup (which ignores it)."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


def interrupted(args, delay, env):
    """The command, sent SIGINT after ``delay`` s unless it ended first: its exit status."""
    p = subprocess.Popen([PY, "-m", "drsftp", *args, "--progress", "never"], stdout=subprocess.DEVNULL,
                         stderr=subprocess.PIPE, text=True, env=env, preexec_fn=default_sigint)
    try:
        p.wait(delay)
    except subprocess.TimeoutExpired:
        p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=30)
    # (-SIGINT: it came as the interpreter exited, after the run's own end: a shell shows 130)
    assert p.returncode in (0, 130, -signal.SIGINT), err
    assert "Traceback" not in err, err
    return 130 if p.returncode < 0 else p.returncode


def settled(*dirs):
    """Nothing grows in ``dirs`` for 0.6 s (bounded: 10 s): no transfer goes on."""
    def sizes():
        return {(d, n): os.path.getsize(os.path.join(d, n)) for d in dirs for n in os.listdir(d)
                if os.path.isfile(os.path.join(d, n))}

    last = [sizes(), time.monotonic()]

    def still():
        now = sizes()
        if now != last[0]:
            last[:] = [now, time.monotonic()]
        return time.monotonic() - last[1] >= 0.6

    assert wait_until(still, timeout=10, step=0.1), last[0]


def check_target(path, src, rc):
    with open(path, "rb") as f:
        data = f.read()
    assert data == OLD or sha256_file(path) == sha256_file(src), (rc, len(data))
    if rc == 0:
        assert sha256_file(path) == sha256_file(src)


def leftovers(*dirs):
    return sorted(n for d in dirs for n in os.listdir(d))


@pytest.mark.parametrize("kind", ["get", "put", "copy"])
def test_interrupts_at_random_points_keep_the_target_and_continue_completes(tmp_path, kind):
    rng = random.Random(f"drs-interrupts-{kind}")
    a, b, local = tmp_path / "a", tmp_path / "b", tmp_path / "local"
    for d in (a, b, local):
        d.mkdir()
    state = tmp_path / "state"
    env = dict(os.environ, XDG_STATE_HOME=str(state))
    sa, sb = throttled(a), throttled(b)
    try:
        for n in range(ROUNDS):
            name = f"f{n}.bin"
            streams = ("-P", "2") if n == 1 else ()  # one round in parallel (ranges kept for --continue)
            if kind == "get":
                src, target = make_file(a / name, SIZE, seed=80 + n), local / name
                args = ["get", *streams, sa.url(name), str(target)]
            elif kind == "put":
                src, target = make_file(local / name, SIZE, seed=80 + n), b / name
                args = ["put", *streams, str(src), sb.url(name)]
            else:
                src, target = make_file(a / name, SIZE, seed=80 + n), b / name
                args = ["copy", *streams, sa.url(name), sb.url(name)]
            target.write_bytes(OLD)
            rc = interrupted(args, rng.uniform(0.3, 2.6), env)
            settled(a, b, local)
            check_target(target, src, rc)
            left = leftovers(a, b, local)
            assert not [x for x in left if x.endswith(".tmp")], left
            part = {"get": f"{name}.part", "put": f".{name}.part", "copy": f".{name}.part"}[kind]
            allowed = {n for n in (part, f"{part}.ranges") if kind == "get" or not n.endswith(".ranges")}
            assert set(left) - {f"f{i}.bin" for i in range(ROUNDS)} <= allowed, left
            # --continue takes up what the interrupted run left; where it left nothing the target's own
            # bytes are no prefix of the source (a --continue would take them as one, as curl -C does)
            again = ["--continue"] if part in left or rc == 0 else []
            r = subprocess.run([PY, "-m", "drsftp", *args, *again, "--progress", "never"],
                               capture_output=True, text=True, timeout=60, env=env)
            assert r.returncode == 0, (rc, left, r.stderr)
            assert sha256_file(target) == sha256_file(src), (rc, left, again)
            assert set(leftovers(a, b, local)) <= {f"f{i}.bin" for i in range(ROUNDS)}, leftovers(a, b, local)
            for kept in ("copies", "puts"):  # the -P runs' records go once the file is complete
                records = state / "drsftp" / kept
                assert not records.exists() or os.listdir(records) == [], os.listdir(records)
    finally:
        sa.stop()
        sb.stop()
