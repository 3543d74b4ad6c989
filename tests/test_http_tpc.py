"""HTTP third-party copy between two `drsftp serve --http-port` processes
over TLS (docs/HTTP.md#third-party-copy): curl -X COPY pull and push with
Basic and with a macaroon, X-Number-Of-Streams 4, gfal-copy pull and push
with the macaroons gfal2 asks for itself, the SSRF guard (nothing
fetched from an unlisted host), and the faults: a source killed or
stalled mid-pull, a full disk, a token that expires mid-copy.  Every byte
compared."""

from __future__ import annotations

import os
import shutil
import subprocess

import pytest
from conftest import make_file, sha256_file, wait_until
from tpcpeers import BASIC, Script, copy, drsftp_peer, last_line, listener, macaroon, scripted
from xrootdserve import make_test_ca

from drsftp.http import perfmarker

SIZE = 5 * (1 << 20) + 12345
SRC_AUTH = f"TransferHeaderAuthorization: {BASIC}"  # the remote's login, forwarded as Authorization
BIG = 150 * (1 << 20) + 777  # three ranges of 64 MiB: four streams share them


@pytest.fixture(scope="module")
def ca(tmp_path_factory):
    return make_test_ca(tmp_path_factory.mktemp("ca"))


@pytest.fixture(scope="module")
def pair(ca, tmp_path_factory):
    """A and B, each listing the other (127.0.0.1) in --third-party-peers."""
    d = tmp_path_factory.mktemp("pair")
    with drsftp_peer(d / "a", ca, "--third-party-peers", "127.0.0.1") as a, \
            drsftp_peer(d / "b", ca, "--third-party-peers", "127.0.0.1", "--data-timeout", "3") as b:
        make_file(a.root / "f.bin", SIZE, seed=3)
        make_file(a.root / "big.bin", BIG, seed=4)
        yield a, b


def markers_of(body: str) -> perfmarker.Outcome:
    return perfmarker.parse_stream(body)


def test_pull_with_basic(pair, ca):
    a, b = pair
    status, body = copy(ca, b.url("pulled.bin"), f"Source: {a.url('f.bin')}", SRC_AUTH)
    assert status == 202, body
    out = markers_of(body)
    assert out.ok and last_line(body) == "success: Created", body
    assert out.stripes and out.stripes[0].count == 1
    assert sha256_file(b.root / "pulled.bin") == sha256_file(a.root / "f.bin")
    assert not (b.root / ".pulled.bin.part").exists()
    assert wait_until(lambda: "path=/pulled.bin" in b.log() and "remote=https://127.0.0.1" in b.log())
    line = next(x for x in b.log().splitlines() if "path=/pulled.bin" in x)
    assert "direction=put" in line and f"bytes={SIZE}" in line and "complete=yes" in line
    assert "drs_peer=yes" in line  # A answered the DRS header: the two servers exchanged reports


def test_push_with_basic(pair, ca):
    a, b = pair
    status, body = copy(ca, a.url("f.bin"), f"Destination: {b.url('pushed.bin')}",
                        f"TransferHeaderAuthorization: {BASIC}")
    assert status == 202 and last_line(body) == "success: Created", body
    assert sha256_file(b.root / "pushed.bin") == sha256_file(a.root / "f.bin")


def test_pull_and_push_with_macaroons(pair, ca):
    a, b = pair
    src = macaroon(ca, a.url("f.bin"), ["activity:DOWNLOAD,LIST"])
    dst = macaroon(ca, b.url("m.bin"), ["activity:UPLOAD,LIST"])
    status, body = copy(ca, b.url("m.bin"), f"Source: {a.url('f.bin')}", f"TransferHeaderAuthorization: Bearer {src}",
                        "Credential: none", auth=f"Bearer {dst}")
    assert status == 202 and last_line(body) == "success: Created", body
    assert sha256_file(b.root / "m.bin") == sha256_file(a.root / "f.bin")
    # push: the file's token at A, B's token forwarded
    src_rw = macaroon(ca, a.url("f.bin"), ["activity:DOWNLOAD"])
    dst2 = macaroon(ca, b.url("m2.bin"), ["activity:UPLOAD"])
    status, body = copy(ca, a.url("f.bin"), f"Destination: {b.url('m2.bin')}",
                        f"TransferHeaderAuthorization: Bearer {dst2}", auth=f"Bearer {src_rw}")
    assert status == 202 and last_line(body) == "success: Created", body
    assert sha256_file(b.root / "m2.bin") == sha256_file(a.root / "f.bin")


def test_four_streams(pair, ca):
    a, b = pair
    status, body = copy(ca, b.url("big4.bin"), f"Source: {a.url('big.bin')}", "X-Number-Of-Streams: 4", SRC_AUTH,
                        "RequireChecksumVerification: true")
    assert status == 202 and last_line(body) == "success: Created", body
    out = markers_of(body)
    assert {m.count for m in out.stripes.values()} == {4} and set(out.stripes) == {0, 1, 2, 3}
    assert sha256_file(b.root / "big4.bin") == sha256_file(a.root / "big.bin")
    assert wait_until(lambda: "path=/big4.bin" in b.log())
    line = next(x for x in b.log().splitlines() if "path=/big4.bin" in x)
    assert "streams=4" in line and f"bytes={BIG}" in line


def test_overwrite_f_and_bad_headers(pair, ca):
    a, b = pair
    make_file(b.root / "exists.bin", 10, seed=9)
    before = sha256_file(b.root / "exists.bin")
    status, body = copy(ca, b.url("exists.bin"), f"Source: {a.url('f.bin')}", "Overwrite: F")
    assert status == 412, body
    assert sha256_file(b.root / "exists.bin") == before
    status, body = copy(ca, b.url("x.bin"), f"Source: {a.url('f.bin')}", "Credential: gridsite")
    assert status == 400 and "credential" in body.lower(), body
    status, body = copy(ca, b.url("x.bin"))
    assert status == 400 and "Source" in body
    status, body = copy(ca, b.url("x.bin"), f"Source: {a.url('missing.bin')}", SRC_AUTH)
    assert status == 202 and last_line(body).startswith("failure:") and "404" in body, body
    assert not (b.root / "x.bin").exists()


@pytest.mark.parametrize("mode", ["pull", "push"])
def test_gfal_copy_with_its_own_macaroons(pair, ca, mode):
    """gfal2 POSTs a macaroon request to each endpoint (RETRIEVE_BEARER_TOKEN),
    then COPYs with the tokens: the Basic header only logs the POSTs in."""
    a, b = pair
    name = f"gfal-{mode}.bin"
    assert shutil.which("gfal-copy"), "gfal-copy is missing (Debian: gfal2-util-scripts, gfal2-plugin-http)"
    env = {**ca.env(), "GFAL_PYTHONBIN": "/usr/bin/python3"}
    r = subprocess.run(["gfal-copy", "-vvv", "--copy-mode", mode, "-D", f"HTTP PLUGIN:HEADERS=Authorization: {BASIC}",
                        "-D", "HTTP PLUGIN:RETRIEVE_BEARER_TOKEN=true", a.url("f.bin", "localhost").replace(
                            "https://", "davs://"), b.url(name, "localhost").replace("https://", "davs://")],
                       capture_output=True, text=True, timeout=180, env=env, check=False)
    assert r.returncode == 0, r.stdout + r.stderr
    assert sha256_file(b.root / name) == sha256_file(a.root / "f.bin")
    # gfal2 says which tokens it got (its -vvv debug lines): one from each server, by POST
    got = r.stderr + r.stdout
    for peer in (a, b):
        assert f"Set bearer token in credential_map[davs://localhost:{peer.port}/" in got, got[-3000:]
    assert "TransferHeaderAuthorization" in got


@pytest.fixture(scope="module")
def guarded(ca, tmp_path_factory):
    """A server whose only listed peer is ::1: 127.0.0.1 is outside its list."""
    d = tmp_path_factory.mktemp("guarded")
    with drsftp_peer(d / "g", ca, "--third-party-peers", "::1") as g:
        make_file(g.root / "f.bin", 1000, seed=5)
        yield g


@pytest.mark.parametrize("how", ["source", "destination", "name"])
def test_ssrf_unlisted_remote_refused(guarded, ca, how):
    with listener() as (port, seen):
        url = f"https://{'localhost' if how == 'name' else '127.0.0.1'}:{port}/secret"
        header = f"Destination: {url}" if how == "destination" else f"Source: {url}"
        status, body = copy(ca, guarded.url("f.bin" if how == "destination" else "t.bin"), header)
        assert status == 403 and "--third-party-peers" in body, body
        assert seen() == 0  # nothing was fetched, or even connected to
    assert wait_until(lambda: f":{port}/secret" in guarded.log())
    assert "not in --third-party-peers" in guarded.log()
    assert not (guarded.root / "t.bin").exists()


def test_ssrf_redirect_to_unlisted_host_not_followed(guarded, ca):
    with listener() as (port, seen):
        script = Script(mode="redirect", location=f"http://127.0.0.1:{port}/secret")
        with scripted(script, "::1") as rport:
            status, body = copy(ca, guarded.url("r.bin"), f"Source: http://[::1]:{rport}/f")
        assert status == 202, body
        assert last_line(body).startswith("failure:") and "--third-party-peers" in body, body
        assert script.connections >= 1 and seen() == 0  # (warm.py's HEADs are redirected and refused too)
    assert not (guarded.root / "r.bin").exists()


@pytest.fixture
def scripted_pair(ca, tmp_path):
    """B lists 127.0.0.1, where the scripted remote listens; --data-timeout 3."""
    with drsftp_peer(tmp_path / "b", ca, "--third-party-peers", "127.0.0.1", "--data-timeout", "3") as b:
        yield b


def test_source_killed_mid_pull(scripted_pair, ca):
    b = scripted_pair
    make_file(b.root / "t.bin", 100, seed=8)
    before = sha256_file(b.root / "t.bin")
    data = os.urandom(2 << 20)
    with scripted(Script(data=data, mode="kill", cut=1 << 20)) as port:
        status, body = copy(ca, b.url("t.bin"), f"Source: http://127.0.0.1:{port}/f")
    assert status == 202 and last_line(body).startswith("failure:"), body
    assert sha256_file(b.root / "t.bin") == before  # the target untouched
    part = b.root / ".t.bin.part"
    assert part.exists() and part.read_bytes() == data[:part.stat().st_size] and part.stat().st_size > 0
    assert wait_until(lambda: "path=/t.bin" in b.log())
    assert "complete=no" in next(x for x in b.log().splitlines() if "path=/t.bin" in x)


def test_stalled_source_fails_after_data_timeout(scripted_pair, ca):
    b = scripted_pair
    with scripted(Script(data=os.urandom(1 << 20), mode="stall", cut=100_000)) as port:
        status, body = copy(ca, b.url("s.bin"), f"Source: http://127.0.0.1:{port}/f", timeout=60)
    assert status == 202 and last_line(body).startswith("failure:"), body
    assert "--data-timeout" in last_line(body)
    assert not (b.root / "s.bin").exists()


def test_token_expiring_mid_copy_does_not_stop_it(scripted_pair, ca):
    """The copy runs on the authorisation it started with (docs/HTTP.md)."""
    b = scripted_pair
    token = macaroon(ca, b.url("e.bin"), ["activity:UPLOAD"], validity="PT3S")
    data = os.urandom(3 << 20)
    with scripted(Script(data=data, pace=0.1)) as port:  # 48 pieces of 64 KiB: about 5 s
        status, body = copy(ca, b.url("e.bin"), f"Source: http://127.0.0.1:{port}/f", auth=f"Bearer {token}")
    assert status == 202 and last_line(body) == "success: Created", body
    assert (b.root / "e.bin").read_bytes() == data
    status, body = copy(ca, b.url("e2.bin"), f"Source: http://127.0.0.1:{port}/f", auth=f"Bearer {token}")
    assert status == 401 and "expired" in body


def test_full_disk_fails_with_no_space(ca, tmp_path):
    """B's root on a 4 MiB tmpfs of a mount namespace of its own."""
    assert shutil.which("unshare"), "unshare is missing (util-linux)"
    root = tmp_path / "small"
    root.mkdir()
    mount = f'mount -t tmpfs -o size=4m tmpfs "{root}" && exec "$0" "$@"'
    with scripted(Script(data=os.urandom(8 << 20))) as port, \
            drsftp_peer(root, ca, "--third-party-peers", "127.0.0.1", ns=("unshare", "-m", "sh", "-c", mount)) as b:
        status, body = copy(ca, b.url("full.bin"), f"Source: http://127.0.0.1:{port}/f")
        assert status == 202 and last_line(body).startswith("failure:") and "no space" in last_line(body), body
        assert not (root / "full.bin").exists()


def test_connections_kept_across_copies(scripted_pair, ca):
    """B keeps its connections to a remote alive from one COPY to the next
    (server/http/tpc/links.py): the first pull opens them (its first and,
    while its first GET is out, the ones warm.py warms up), the next two
    open none and warm none up (their first connection is warm)."""
    b = scripted_pair
    data = os.urandom(300_000)
    script = Script(data=data, pace=0.05)  # (five pieces: the first pull's warm-ups are answered before it ends)
    with scripted(script) as port:
        for name in ("k1.bin", "k2.bin", "k3.bin"):
            status, body = copy(ca, b.url(name), f"Source: http://127.0.0.1:{port}/f")
            assert status == 202 and last_line(body) == "success: Created", body
            assert (b.root / name).read_bytes() == data
            if name == "k1.bin":
                opened, asked = script.connections, len(script.requests)
        assert script.connections == opened and len(script.requests) == asked + 2
        assert [m for m, _, _ in script.requests].count("GET") == 3


def test_streams_chosen_without_a_header(scripted_pair, ca):
    """No X-Number-Of-Streams: B chooses (server/http/tpc/auto.py), as -P
    auto does; a source slow enough to outlast a probe gets a second
    connection, each on ranges of its own, the file whole."""
    b = scripted_pair
    data = os.urandom(32 << 20)
    script = Script(data=data, ranges=True, pace=0.01)  # 64 KiB a 10 ms a connection: 4 s for one
    with scripted(script) as port:
        status, body = copy(ca, b.url("auto.bin"), f"Source: http://127.0.0.1:{port}/f")
    assert status == 202 and last_line(body) == "success: Created", body
    assert (b.root / "auto.bin").read_bytes() == data
    assert script.connections >= 2
    out = markers_of(body)
    assert len(out.stripes) >= 2 and all(m.count == len(out.stripes) for m in out.stripes.values())
    assert sum(m.transferred for m in out.stripes.values()) == len(data)  # (the last markers, before the outcome)
    ranges = sorted(h["Range"] for m, _, h in script.requests if m == "GET")
    assert ranges[0] == f"bytes=0-{(16 << 20) - 1}" and len(ranges) >= 3
    assert wait_until(lambda: "path=/auto.bin" in b.log())
    line = next(x for x in b.log().splitlines() if "path=/auto.bin" in x)
    assert f"streams={len(out.stripes)}" in line


def test_a_free_stream_steals_the_tail_of_a_running_range(scripted_pair, ca):
    """Two streams (X-Number-Of-Streams: 2): the first asks 16 MiB, the
    second the 8 MiB left (its share, http/steal.py); done first, the
    second takes the tail of the first's range, which stops at the cut and
    closes its connection (decision 0043).  The second stream's connection
    was opened by a HEAD while the first GET was out (warm.py).  The file
    whole."""
    b = scripted_pair
    data = os.urandom(24 << 20)
    script = Script(data=data, ranges=True, pace=0.005)  # 64 KiB a 5 ms a connection: 2.6 s for the first range
    with scripted(script) as port:
        status, body = copy(ca, b.url("stolen.bin"), f"Source: http://127.0.0.1:{port}/f", "X-Number-Of-Streams: 2")
    assert status == 202 and last_line(body) == "success: Created", body
    assert (b.root / "stolen.bin").read_bytes() == data
    assert [m for m, _, _ in script.requests].count("HEAD") == 1 and script.connections == 2
    ranges = [h["Range"] for m, _, h in script.requests if m == "GET"]
    assert ranges[:2] == [f"bytes=0-{(16 << 20) - 1}", f"bytes={16 << 20}-{(24 << 20) - 1}"]
    tails = [r for r in ranges[2:] if r.endswith(f"-{(16 << 20) - 1}")]
    assert len(tails) == 1 and 0 < int(tails[0][6:].split("-")[0]) < 16 << 20, ranges


@pytest.mark.parametrize(("rtt_us", "warmed"), [(100_000, 7), (100, 0)])
def test_auto_warms_up_the_streams_its_first_connections_rtt_starts(monkeypatch, rtt_us, warmed):
    """-P auto's warm-ups (warm.py): once the first connection's TCP
    handshake gives its RTT, as many connections as first_streams starts
    less the first: 8 on a 100 ms path with a 4 MiB window cap, none on a
    0.1 ms one."""
    import asyncio
    import types

    from drsftp.server.http.tpc import warm

    heads = []

    async def head(job, stripe):
        heads.append(stripe.index)

    monkeypatch.setattr(warm, "_head", head)
    monkeypatch.setattr(warm, "handshake_rtt", lambda sock: rtt_us / 1e6)  # (its TCP handshake done)
    monkeypatch.setattr(warm, "window_cap", lambda settings: 4 << 20)
    link = types.SimpleNamespace(fresh=True, sock=object())
    job = types.SimpleNamespace(auto=True, streams=1, remote=None, guard=None,
                                stripes=[types.SimpleNamespace(link=link, index=0)])
    job.new_stripe = lambda i, cfg, guard: types.SimpleNamespace(index=i, link=None, give_back=lambda: None)
    cfg = types.SimpleNamespace(links=types.SimpleNamespace(taken={}), tls=None, timeout=None, max_streams=64,
                                drs=None)
    monkeypatch.setattr(warm, "key_of", lambda remote, tls, timeout: "k")

    async def go():
        w = warm.Warm(job, cfg)
        await w.counting
        await asyncio.gather(*w.tasks.values())
        return sorted(w.tasks)

    assert asyncio.run(go()) == list(range(1, warmed + 1)) and sorted(heads) == list(range(1, warmed + 1))


def test_a_pull_whose_streams_all_ended_with_bytes_unfetched_fails(monkeypatch):
    """pull._Pull.run: every stream ended and the plan still misses bytes
    (a range given back after the others stopped): a failure, never a
    rename of a part file with a hole."""
    import asyncio
    import types

    from drsftp.http.steal import Plan
    from drsftp.server.http.tpc import pull

    async def idle(self, stripe, resp, span):  # (a stream that ends at once)
        return None

    monkeypatch.setattr(pull._Pull, "_worker", idle)
    stripe = types.SimpleNamespace(index=0, done=False, ending=False, moved=0, link=None)
    job = types.SimpleNamespace(stripes=[stripe], streams=1, moved=0, target=types.SimpleNamespace(href="/h"))
    plan = Plan(1 << 20, 4 << 20, 64 << 20)

    async def go():
        p = pull._Pull(job, -1, None, plan, None, types.SimpleNamespace())
        await p.run(None, plan.open(0, 1 << 20))

    with pytest.raises(pull.CopyFailed, match="not fetched"):
        asyncio.run(go())


def test_a_stream_the_source_refuses_ends_and_the_others_finish(scripted_pair, ca):
    """X-Number-Of-Streams: 4 from a source that takes two connections from
    an address (503 past them, as drsftp serve's --max-connections-per-ip
    does): the refused streams end, their ranges go to the two that run,
    and the file arrives whole (pull._Pull._worker)."""
    b = scripted_pair
    data = os.urandom(24 << 20)
    script = Script(data=data, ranges=True, pace=0.002, busy_after=2)
    with scripted(script) as port:
        status, body = copy(ca, b.url("busy.bin"), f"Source: http://127.0.0.1:{port}/f", "X-Number-Of-Streams: 4")
    assert status == 202 and last_line(body) == "success: Created", body
    assert (b.root / "busy.bin").read_bytes() == data
    assert script.connections > 2  # (the refused ones were tried)


def test_a_redirect_from_https_to_plain_http_is_refused_before_it_is_followed():
    import asyncio

    from drsftp.server.http.problem import Problem
    from drsftp.server.http.tpc.guard import Guard
    from drsftp.server.peers import parse_peers

    guard = Guard(parse_peers("127.0.0.1"), "a test")

    async def hop(src: str, location: str):
        return await guard.hop(await guard.check(src, "source"), location, 0, "source")

    with pytest.raises(Problem) as refused:  # (the source's credentials would follow in clear)
        asyncio.run(hop("https://127.0.0.1:8443/f", "http://127.0.0.1:8080/f"))
    assert refused.value.status == 502 and "plain text" in str(refused.value.sentence)
    assert asyncio.run(hop("https://127.0.0.1:8443/f", "/g")).url == "https://127.0.0.1:8443/g"
    assert asyncio.run(hop("http://127.0.0.1:8080/f", "https://127.0.0.1:8443/g")).scheme == "https"
