"""`drsftp serve --metrics`: Prometheus /metrics fed by the transfer log's
records, /api/transfers with the transfers running, the status page, its
access rules; a real Prometheus scrapes it and headless Chromium draws
the page (both Debian packages that ./run installs)."""

from __future__ import annotations

import ftplib
import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
from conftest import (
    PASSWORD,
    PY,
    USER,
    drsftp,
    ftp_session,
    make_file,
    reply_of,
    start_stalled_retr,
    wait_until,
)
from prometheus_client.parser import text_string_to_metric_families
from test_eblock_server import Ctl, block, closed_by_peer, put_mode_e, stream
from test_interop_peers import _lftp
from tlscerts import make_certs

from drsftp.ftp.eblock import Desc, header
from drsftp.netem.link import stop_process

REPO = Path(__file__).resolve().parent.parent
ARTIFACTS = REPO / "tests" / "artifacts"  # kept after the run (ignored by git)
MiB = 1 << 20
TOKEN = "drs-test-token-0123456789abcdef"


# -- helpers ------------------------------------------------------------------------------
def http_get(url, token=None, headers=None):
    """(status, headers, body) of a GET."""
    req = urllib.request.Request(url, headers=dict(headers or {}))
    if token:
        req.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.status, r.headers, r.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.headers, exc.read()


def samples(base, token=None) -> dict[tuple[str, tuple], float]:
    """/metrics parsed: (sample name, sorted labels) -> value."""
    status, _, body = http_get(base + "metrics", token)
    assert status == 200, body
    return {(s.name, tuple(sorted(s.labels.items()))): s.value
            for fam in text_string_to_metric_families(body.decode()) for s in fam.samples}


def value(base, name, token=None, **labels) -> float:
    return samples(base, token)[(name, tuple(sorted(labels.items())))]


def transfers(base, token=None, history=False) -> list[dict]:
    status, headers, body = http_get(base + "api/transfers" + ("?history=1" if history else ""), token)
    assert status == 200 and headers["Content-Type"] == "application/json", body
    return json.loads(body)["transfers"]


class MetricsServer:
    """`drsftp serve --metrics 127.0.0.1:0` (and ``extra``), stopped by PID."""

    def __init__(self, root, *extra):
        from conftest import ServerProcess

        self.srv = ServerProcess(root, "--metrics", "127.0.0.1:0", *extra)
        self._lines = [self.srv.proc.stdout.readline()]  # the line after "listening on"
        self.port = self.srv.port
        self.base = re.search(r"metrics and status page on (http://\S+)", self._lines[0]).group(1)

    def url(self, path):
        return self.srv.url(path)

    def stop(self):
        return self.srv.stop()


@pytest.fixture
def root(tmp_path):
    root = tmp_path / "srv"
    root.mkdir()
    make_file(root / "big.bin", 64 * MiB, seed=3)
    return root


@pytest.fixture
def metrics_server(root):
    srv = MetricsServer(root)
    yield srv
    srv.stop()


class SlowRetr:
    """A stream-mode RETR whose client reads about ``rate`` bytes/s in a
    thread of its own until stopped (at most 120 s)."""

    def __init__(self, port, name, rate=4 * MiB):
        self.ftp = ftp_session(port)
        self.data, head = start_stalled_retr(self.ftp, name)
        self.got = len(head)
        self.rate = rate
        self.stop_reading = threading.Event()
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self):
        deadline = time.monotonic() + 120
        while not self.stop_reading.is_set() and time.monotonic() < deadline:
            try:
                chunk = self.data.recv(64 << 10)
            except OSError:
                return
            if not chunk:
                return
            self.got += len(chunk)
            time.sleep(len(chunk) / self.rate)  # the client's pace, not a wait for a condition

    def close(self):
        self.stop_reading.set()
        self.thread.join(10)
        self.data.close()
        try:
            self.ftp.getresp()  # the RETR's final reply (426: the client closed)
        except ftplib.all_errors:
            pass
        self.ftp.close()


def prometheus_query(port, query):
    url = f"http://127.0.0.1:{port}/api/v1/query?" + urllib.parse.urlencode({"query": query})
    status, _, body = http_get(url)
    assert status == 200, body
    return json.loads(body)["data"]["result"]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# -- /metrics and /api/transfers of a running server --------------------------------------------
def test_byte_counters_count_a_64mib_get_and_the_api_shows_a_running_retr(metrics_server, root, tmp_path):
    base = metrics_server.base
    get_complete = {"direction": "get", "result": "complete"}
    assert value(base, "drsftp_transfer_bytes_total", **get_complete) == 0
    assert value(base, "drsftp_transfers_in_flight", direction="get") == 0

    slow = SlowRetr(metrics_server.port, "big.bin")
    try:
        def running():
            ts = transfers(base)
            return ts[0] if len(ts) == 1 and ts[0]["rate_bps"] > 0 and ts[0]["rtt_ms"] else None

        assert wait_until(running, 15), transfers(base)
        t = running()
        assert (t["user"], t["path"], t["direction"], t["mode"], t["streams"]) == (USER, "/big.bin", "get", "S", 1)
        assert 0 < t["bytes"] < 64 * MiB and t["rtt_ms"] > 0 and t["drs"] is True and t["tuning"].startswith("drs")
        [s] = t["per_stream"]
        assert s["rate_bps"] == t["rate_bps"] and s["rtt_ms"] == t["rtt_ms"] and s["sndbuf"] > 0
        assert value(base, "drsftp_transfers_in_flight", direction="get") == 1
        assert value(base, "drsftp_sessions") == 1
        [h] = transfers(base, history=True)
        assert len(h["history"]["t"]) >= 1 and len(h["history"]["rate_bps"]) == len(h["history"]["t"])
    finally:
        slow.close()
    assert wait_until(lambda: value(base, "drsftp_transfers_total", direction="get", result="failed") == 1, 10)
    partial = value(base, "drsftp_transfer_bytes_total", direction="get", result="failed")
    assert 0 < partial < 64 * MiB  # what the aborted RETR sent, counted as it ended

    r = drsftp("get", metrics_server.url("big.bin"), str(tmp_path / "got.bin"), "-q")
    assert r.returncode == 0, r.stderr
    assert wait_until(lambda: value(base, "drsftp_transfer_bytes_total", **get_complete) == 64 * MiB, 10)
    m = samples(base)
    assert m[("drsftp_transfers_total", (("direction", "get"), ("result", "complete")))] == 1
    assert m[("drsftp_transfer_rate_bytes_per_second_count", ())] == 1
    assert m[("drsftp_transfer_rtt_seconds_count", ())] == 1
    assert 0 < m[("drsftp_transfer_rtt_seconds_sum", ())] < 0.1  # loopback
    assert m[("drsftp_logins_total", (("result", "ok"),))] == 2
    assert m[("drsftp_buffer_budget_bytes", ())] == 256 * MiB
    assert wait_until(lambda: transfers(base) == [], 5)


def test_a_mode_e_upload_shows_its_streams_and_counts_once(root):
    srv = MetricsServer(root, "--max-streams", "2")
    try:
        base = srv.base
        ctl = Ctl(srv.port)
        port = put_mode_e(ctl, "up.bin", allo=8)
        a, b = stream(port), stream(port)
        a.sendall(block(0, b"abcd"))
        b.sendall(block(4, b"ef"))

        def running():
            ts = transfers(base)
            return ts[0] if len(ts) == 1 and ts[0]["streams"] == 2 else None

        assert wait_until(running, 10), transfers(base)
        t = running()
        assert (t["mode"], t["direction"], t["path"], t["bytes"]) == ("E", "put", "/up.bin", 6)
        assert len(t["per_stream"]) == 2 and all(s["rcvbuf"] > 0 for s in t["per_stream"])
        assert value(base, "drsftp_transfers_in_flight", direction="put") == 1
        assert closed_by_peer(stream(port))  # a third stream: over --max-streams
        assert closed_by_peer(stream(port, src="127.0.0.2"))  # from another address
        a.sendall(header(Desc.EOD, 0, 0))
        b.sendall(block(6, b"gh") + header(Desc.EOD | Desc.EOF, 0, 2))
        assert ctl.final()[0] == "226"
        assert wait_until(lambda: value(base, "drsftp_transfer_bytes_total", direction="put", result="complete")
                          == 8, 5)
        m = samples(base)
        assert m[("drsftp_transfers_total", (("direction", "put"), ("result", "complete")))] == 1
        assert m[("drsftp_transfer_rtt_seconds_count", ())] == 1  # the streams' RTT
        assert m[("drsftp_refusals_total", (("reason", "limit"),))] == 1
        assert m[("drsftp_refusals_total", (("reason", "bounce"),))] == 1
        ctl.close()
    finally:
        srv.stop()


def test_a_download_on_byte_ranges_counts_once(root, tmp_path):
    """lftp's pget: REST + RETR of ranges over several sessions is one
    transfer in the log, so one in the metrics."""
    local = tmp_path / "local"
    local.mkdir()
    make_file(root / "f.bin", 6 * MiB, seed=8)
    srv = MetricsServer(root, "--tuning", "fixed:8k")  # the first range must not end before the others start
    try:
        _lftp(srv.port, local, "set pget:min-chunk-size 512k; pget -n 4 f.bin -o p.bin")
        get_complete = {"direction": "get", "result": "complete"}
        assert wait_until(lambda: value(srv.base, "drsftp_transfers_total", **get_complete) == 1, 10)
        m = samples(srv.base)
        assert m[("drsftp_transfer_bytes_total", (("direction", "get"), ("result", "complete")))] == 6 * MiB
        assert m[("drsftp_transfers_total", (("direction", "get"), ("result", "failed")))] == 0
        assert m[("drsftp_transfer_rtt_seconds_count", ())] == 1
    finally:
        srv.stop()


def test_refusals_and_logins_by_reason(root, tmp_path):
    certs = make_certs(tmp_path / "certs")
    srv = MetricsServer(root, "--max-connections-per-ip", "2", "--tls-cert", str(certs.good), "--require-tls")
    try:
        base = srv.base
        ftp = ftplib.FTP()
        ftp.connect("127.0.0.1", srv.port, timeout=30)
        assert reply_of(ftp, f"USER {USER}").startswith("550")  # clear text under --require-tls
        tls = ftplib.FTP_TLS(context=_client_context(certs.ca))
        tls.connect("127.0.0.1", srv.port, timeout=30)
        tls.auth()
        with pytest.raises(ftplib.error_perm):
            tls.login(USER, "wrong")
        third = ftplib.FTP()
        with pytest.raises(ftplib.error_temp, match="421"):  # a third session from this address
            third.connect("127.0.0.1", srv.port, timeout=30)
        tls.login(USER, PASSWORD)
        tls.prot_p()
        assert reply_of(tls, "PORT 127,0,0,2,200,1").startswith("501")  # another address (RFC 2577)
        assert reply_of(tls, "PORT 127,0,0,1,0,80").startswith("501")  # a privileged port
        m = samples(base)
        refusals = {labels[0][1]: v for (name, labels), v in m.items() if name == "drsftp_refusals_total"}
        assert refusals == {"limit": 1, "bounce": 2, "tls": 1}
        logins = {labels[0][1]: v for (name, labels), v in m.items() if name == "drsftp_logins_total"}
        assert logins == {"ok": 1, "credentials": 1, "tls_required": 1}
        tls.close()
        ftp.close()
    finally:
        srv.stop()


def _client_context(ca):
    import ssl

    return ssl.create_default_context(cafile=str(ca))


# -- access ------------------------------------------------------------------------------------
def test_a_token_guards_the_data_and_the_page_holds_none(root, tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    srv = MetricsServer(root, "--metrics-token-file", str(token_file))
    try:
        base = srv.base
        for path in ("metrics", "api/transfers"):
            status, headers, _ = http_get(base + path)
            assert status == 401 and headers["WWW-Authenticate"].startswith("Bearer")
            assert http_get(base + path, "x" + TOKEN)[0] == 401
            assert http_get(base + path, TOKEN)[0] == 200
        status, headers, page = http_get(base)  # the page: no data of its own, no token
        assert status == 200 and headers["Content-Type"].startswith("text/html")
        assert b"<title>drsftp: running transfers</title>" in page
        assert "default-src 'none'" in headers["Content-Security-Policy"]
        assert not re.search(rb"""(src|href)=["']?(https?:)?//""", page)  # no external assets
        assert http_get(base + "nothing")[0] == 404
    finally:
        srv.stop()


def test_without_a_token_only_requests_naming_an_address_are_answered(metrics_server):
    base = metrics_server.base
    port = urllib.parse.urlsplit(base).port
    assert http_get(base + "metrics", headers={"Host": f"localhost:{port}"})[0] == 200
    for host in (f"attacker.example:{port}", "attacker.example", f"127.0.0.1.attacker.example:{port}"):
        assert http_get(base + "metrics", headers={"Host": host})[0] == 403  # DNS rebinding
        assert http_get(base + "api/transfers", headers={"Host": host})[0] == 403


@pytest.mark.parametrize(("args", "error"), [
    (["--metrics", "0.0.0.0:9300"], "--metrics 0.0.0.0:9300 listens beyond this host: give a metrics token"),
    (["--metrics", "127.0.0.1:99999"], "--metrics must be ADDR:PORT such as 127.0.0.1:9300"),
    (["--metrics", "127.0.0.1:0", "--metrics-token-file", "{tmp}/short"], "the metrics token in {tmp}/short must"
     " be at least 16 printable characters"),
    (["--metrics", "127.0.0.1:0", "--metrics-token-file", "{tmp}/missing"],
     "cannot read the metrics token file {tmp}/missing"),
])
def test_metrics_options_refused_in_one_sentence_before_listening(root, tmp_path, args, error):
    (tmp_path / "short").write_text("abc\n")
    args = [a.format(tmp=tmp_path) for a in args]
    r = drsftp("serve", "--root", str(root), "--port", "0", "--user", USER, "--password", PASSWORD, *args,
               timeout=60)
    assert r.returncode == 2 and "listening" not in r.stdout
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("drsftp: error: " + error.format(tmp=tmp_path)), r.stderr


def test_a_token_file_a_user_could_download_is_refused(root):
    (root / "token").write_text(TOKEN + "\n")
    r = drsftp("serve", "--root", str(root), "--port", "0", "--user", USER, "--password", PASSWORD,
               "--metrics", "127.0.0.1:0", "--metrics-token-file", str(root / "token"), timeout=60)
    assert r.returncode == 2 and "listening" not in r.stdout
    assert f"would be served the metrics token file {root / 'token'}" in r.stderr, r.stderr


def test_the_config_file_sets_metrics_and_its_token(root, tmp_path):
    conf = tmp_path / "drsftp.toml"
    conf.write_text(f'root = "{root}"\nport = 0\nuser = "{USER}"\npassword = "{PASSWORD}"\n'
                    f'metrics = "127.0.0.1:0"\nmetrics_token = "{TOKEN}"\n')
    from conftest import ServerProcess

    srv = ServerProcess("", cmd=[PY, "-m", "drsftp", "serve", "--config", str(conf)])
    try:
        base = re.search(r"on (http://\S+)", srv.proc.stdout.readline()).group(1)
        assert http_get(base + "metrics")[0] == 401
        assert http_get(base + "metrics", TOKEN)[0] == 200
    finally:
        srv.stop()
    conf.write_text(f'root = "{root}"\nuser = "{USER}"\npassword = "{PASSWORD}"\n\nmetrics = "0.0.0.0:9300"\n')
    r = drsftp("serve", "--config", str(conf), timeout=60)
    assert r.returncode == 2 and "listens beyond this host" in r.stderr
    conf.write_text(f'root = "{root}"\nmetrics = 9300\n')
    r = drsftp("serve", "--config", str(conf), timeout=60)
    assert r.returncode == 2 and f"{conf}:2: metrics must be a string" in r.stderr


# -- real components: Prometheus and Chromium ---------------------------------------------------
def test_prometheus_scrapes_the_bytes_of_a_transfer(root, tmp_path):
    prometheus = shutil.which("prometheus")
    assert prometheus, "the Debian package prometheus is installed by ./run"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    srv = MetricsServer(root, "--metrics-token-file", str(token_file))
    prom_port = free_port()
    target = urllib.parse.urlsplit(srv.base).netloc
    config = tmp_path / "prometheus.yml"
    config.write_text(
        "global: {scrape_interval: 1s, evaluation_interval: 1s}\n"
        "scrape_configs:\n"
        "  - job_name: drsftp\n"
        f"    authorization: {{credentials_file: {token_file}}}\n"
        f"    static_configs: [{{targets: ['{target}']}}]\n")
    prom = subprocess.Popen([prometheus, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}",
                             f"--web.listen-address=127.0.0.1:{prom_port}"],
                            stdout=subprocess.DEVNULL, stderr=(tmp_path / "prometheus.log").open("w"))
    try:
        assert wait_until(lambda: _ready(prom_port), 30, 0.2), (tmp_path / "prometheus.log").read_text()[-2000:]
        r = drsftp("get", srv.url("big.bin"), str(tmp_path / "got.bin"), "-q")
        assert r.returncode == 0, r.stderr
        query = 'drsftp_transfer_bytes_total{direction="get",result="complete"}'

        def scraped():
            result = prometheus_query(prom_port, query)
            return result and float(result[0]["value"][1]) == 64 * MiB

        assert wait_until(scraped, 30, 0.5), prometheus_query(prom_port, query)
        [up] = prometheus_query(prom_port, 'up{job="drsftp"}')
        assert up["value"][1] == "1"  # scraped with the bearer token
    finally:
        stop_process(prom)  # (by its PID: terminate, then kill after 15 s)
        srv.stop()


def _ready(port) -> bool:
    try:
        return http_get(f"http://127.0.0.1:{port}/-/ready")[0] == 200
    except OSError:
        return False


def test_chromium_shows_a_slow_transfer_on_the_status_page(root, tmp_path):
    chromium = shutil.which("chromium")
    assert chromium, "the Debian package chromium is installed by ./run"
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    weird = "<img src=x onerror=alert(1)> & co.bin"  # a file name is shown as text, never run as HTML
    os.link(root / "big.bin", root / weird)
    srv = MetricsServer(root, "--metrics-token-file", str(token_file))
    slow = SlowRetr(srv.port, weird, rate=2 * MiB)
    try:
        assert wait_until(lambda: [t["rate_bps"] > 0 for t in transfers(srv.base, TOKEN)] == [True], 15)
        url = srv.base + "#token=" + TOKEN  # a fragment: the browser keeps it, the server never sees it
        dom = _chromium(chromium, tmp_path, "--dump-dom", url).stdout
        m = re.search(r'<section class="transfer" data-id="\d+" data-direction="get">(.*?)</section>', dom, re.S)
        assert m, dom[-3000:]
        card = m.group(1)
        assert '<span class="path">/&lt;img src=x onerror=alert(1)&gt; &amp; co.bin</span>' in card
        assert re.search(r'data-fact="rate">rate <b>[\d.]+ [kMG]bit/s</b>', card), card
        assert re.search(r'data-fact="rtt">RTT <b>[\d.]+ ms</b>', card), card
        assert card.count("<polyline") == 3 and '<b>on</b>' in card
        ARTIFACTS.mkdir(exist_ok=True)
        shot = ARTIFACTS / "statuspage.png"
        shot.unlink(missing_ok=True)
        _chromium(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1280,720", url)
        data = shot.read_bytes() if shot.exists() else b""
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 10_000, f"screenshot {shot}: {len(data)} bytes"
        print(f"status page screenshot: {shot}")
    finally:
        slow.close()
        srv.stop()


def _chromium(chromium, tmp_path, *args):
    """Headless Chromium with a profile of its own (root needs --no-sandbox);
    the page's script runs for a few seconds of virtual time first."""
    profile = tempfile.mkdtemp(dir=tmp_path, prefix="chromium-")
    r = subprocess.run([chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                        f"--user-data-dir={profile}", "--virtual-time-budget=3000", *args], check=False,
                       capture_output=True, text=True, timeout=90)
    assert r.returncode == 0, r.stderr[-2000:]
    return r


# -- the scrape config and alert rules of docs/DEPLOY.md ------------------------------------------
def _deploy_block(first_line: str) -> str:
    """The ```yaml block of docs/DEPLOY.md that starts with ``first_line``."""
    text = (REPO / "docs" / "DEPLOY.md").read_text()
    m = re.search(r"```yaml\n(" + re.escape(first_line) + r"\n.*?)```", text, re.S)
    assert m, f"docs/DEPLOY.md has no yaml block starting {first_line!r}"
    return m.group(1)


def test_the_documented_scrape_config_and_alert_rules_hold(tmp_path):
    """promtool (Debian prometheus) checks the scrape config and runs the
    alert rules over made-up series: each fires when it should and only
    then."""
    promtool = shutil.which("promtool")
    assert promtool, "promtool comes with the Debian package prometheus, installed by ./run"
    rules = _deploy_block("# drsftp-alerts.yml")
    (tmp_path / "drsftp-alerts.yml").write_text(rules)
    token = tmp_path / "drsftp-token"
    token.write_text(TOKEN + "\n")
    (tmp_path / "prometheus.yml").write_text(
        _deploy_block("# prometheus.yml").replace("/etc/prometheus/drsftp-token", str(token)))
    r = subprocess.run([promtool, "check", "config", str(tmp_path / "prometheus.yml")], check=False,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
    summaries = dict(re.findall(r'- alert: (\w+)\n(?:.*\n)*?\s+summary: "(.*)"', rules))
    assert set(summaries) == {"DrsftpTransfersFailing", "DrsftpBufferBudgetFull"}

    def alert(name, instance):
        summary = summaries[name].replace("{{ $labels.instance }}", instance)
        return (f"{{exp_labels: {{instance: {instance}, severity: warning}},"
                f" exp_annotations: {{summary: {json.dumps(summary)}}}}}")

    def check(at, name, expected):
        return f"      - {{eval_time: {at}, alertname: {name}, exp_alerts: [{expected}]}}\n"

    def series(name, instance, values, **labels):
        labels_text = ",".join([f'instance="{instance}"'] + [f'{k}="{v}"' for k, v in labels.items()])
        return f"      - series: '{name}{{{labels_text}}}'\n        values: '{values}'\n"

    inputs = (
        # "bad": one transfer in two fails, and 95% of its budget is held; "good": neither
        series("drsftp_transfers_total", "bad", "0+2x60", direction="get", result="complete")
        + series("drsftp_transfers_total", "bad", "0+2x60", direction="get", result="failed")
        + series("drsftp_transfers_total", "good", "0+4x60", direction="get", result="complete")
        + series("drsftp_transfers_total", "good", "0+0x60", direction="get", result="failed")
        + series("drsftp_buffer_budget_bytes", "bad", "1000x60")
        + series("drsftp_buffer_budget_in_use_bytes", "bad", "950x60")
        + series("drsftp_buffer_budget_bytes", "good", "1000x60")
        + series("drsftp_buffer_budget_in_use_bytes", "good", "500x60"))
    (tmp_path / "alerts-test.yml").write_text(
        "rule_files: [drsftp-alerts.yml]\n"
        "evaluation_interval: 1m\n"
        "tests:\n"
        "  - interval: 1m\n"
        "    input_series:\n" + inputs +
        "    alert_rule_test:\n"
        + check("5m", "DrsftpTransfersFailing", "")  # not yet: it must hold for 10m
        + check("40m", "DrsftpTransfersFailing", alert("DrsftpTransfersFailing", "bad"))
        + check("10m", "DrsftpBufferBudgetFull", "")
        + check("40m", "DrsftpBufferBudgetFull", alert("DrsftpBufferBudgetFull", "bad")))
    r = subprocess.run([promtool, "test", "rules", "alerts-test.yml"], check=False, cwd=tmp_path,
                       capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stdout + r.stderr
