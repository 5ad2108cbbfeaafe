"""dex-web served by the real `dex-server-zd dev` (docs/dex-web.md, "How it is served"): the app
and the JSON gateway on --web-listen, --no-web leaves the port closed, and an address in use
fails startup naming it; two `serve` processes with web.listen: the hot standby's gateway answers
503, the active one's 200, and GET /api/v1/process tells each one's role, epoch, holder and log
position, before and after a takeover."""
import json
import signal
import socket
import time
import urllib.error
import urllib.request

from conftest import binary, free_port

READY = "dex-server-zd dev ready"


def start_dev(procs, data_dir, *extra):
    return procs(binary("dex-server-zd"), "dev", "--data-dir", data_dir, "--listen", "127.0.0.1:0",
                 *extra)


def http(method, url, body=None):
    """(status, headers, body text) of one request; HTTP errors are answers too."""
    data = None if body is None else body.encode()
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as res:
            return res.status, res.headers, res.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers, e.read().decode()


def port_open(port):
    with socket.socket() as s:
        s.settimeout(2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_dev_serves_the_app_and_the_json_gateway_on_web_listen(procs, tmp_path):
    assets = tmp_path / "assets"
    (assets / "assets").mkdir(parents=True)
    (assets / "index.html").write_text("<!doctype html><title>dex</title><div id=root></div>")
    (assets / "assets" / "index-Zz9.js").write_text("console.log(1)")
    port = free_port()
    dev = start_dev(procs, tmp_path / "data", "--web-listen", f"127.0.0.1:{port}",
                    "--web-assets", assets)
    dev.wait_for_line(f"dex-web on http://127.0.0.1:{port}", 60)
    dev.wait_for_line(READY, 60)
    base = f"http://127.0.0.1:{port}"

    status, headers, page = http("GET", base + "/")
    assert status == 200 and "id=root" in page, page
    assert headers["Cache-Control"] == "no-cache"
    status, headers, _ = http("GET", base + "/assets/index-Zz9.js")
    assert status == 200 and headers["Content-Type"].startswith("text/javascript")
    status, _, page = http("GET", base + "/flows/some-flow")  # the app's own route
    assert status == 200 and "id=root" in page

    status, _, body = http("POST", base + "/api/v1/dex.FlowService/SearchFlows", "{}")
    assert status == 200, body
    page = json.loads(body)
    assert page["rows"] == [] and page["nextPageToken"] == "", page
    status, _, body = http("POST", base + "/api/v1/dex.FlowService/DescribeFlow",
                           '{"flowId":"nope"}')
    assert status == 404 and json.loads(body)["code"] == "NOT_FOUND", body
    status, _, body = http("GET", base + "/api/v1/web")
    info = json.loads(body)
    assert status == 200 and info["adminAuth"] is False and info["version"], info
    status, _, body = http("POST", base + "/api/v1/dex.AdminService/Describe", "{}")
    assert status == 200, body
    described = json.loads(body)
    status, headers, body = http("GET", base + "/api/v1/process")
    assert status == 200 and headers["Cache-Control"] == "no-store", body
    me = json.loads(body)
    assert me["role"] == "active" and me["phase"] == "active" and me["serving"] is True, me
    assert me["standbyMode"] == "cold" and me["standbyState"] is None, me
    assert me["nodeId"] == described["nodeId"] and me["epoch"] == described["nodeEpoch"], me
    assert me["holderProcessId"] == described["holderProcessId"] == me["processId"], me
    assert me["holderIsThisProcess"] is True and me["notServingReason"] is None, me
    assert int(me["logHead"]) >= 0, me  # the EpochStart's slot at least

    # SIGTERM stops dex-web, then the API, and exits 0.
    dev.signal(signal.SIGTERM)
    assert dev.wait_exit(60) == 0, dev.output()
    assert not port_open(port)


def test_without_built_assets_a_page_says_how_to_build_them(procs, tmp_path):
    port = free_port()
    dev = start_dev(procs, tmp_path / "data", "--web-listen", f"127.0.0.1:{port}",
                    "--web-assets", tmp_path / "not-built")
    dev.wait_for_line(READY, 60)
    assert "not built" in dev.wait_for_line("dex-web's assets are not built", 10)
    status, _, page = http("GET", f"http://127.0.0.1:{port}/")
    assert status == 200 and "scripts/build-web" in page, page
    status, _, body = http("POST", f"http://127.0.0.1:{port}/api/v1/dex.FlowService/SearchFlows",
                           "")
    assert status == 200, body


def test_no_web_leaves_the_port_closed(procs, tmp_path):
    port = free_port()
    dev = start_dev(procs, tmp_path / "data", "--web-listen", f"127.0.0.1:{port}", "--no-web")
    dev.wait_for_line(READY, 60)
    assert not port_open(port)
    assert "dex-web on" not in dev.output(), dev.output()


def test_a_web_address_in_use_fails_startup_naming_it(procs, tmp_path):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        dev = start_dev(procs, tmp_path / "data", "--web-listen", f"127.0.0.1:{port}")
        assert dev.wait_exit(60) != 0, dev.output()
    out = dev.output()
    assert f"cannot listen on 127.0.0.1:{port} for dex-web" in out, out
    assert "in use" in out and "--no-web" in out, out
    assert READY not in out


def test_a_hot_standbys_gateway_answers_503_and_the_active_ones_200(procs, tmp_path):
    from test_graceful_shutdown import Serve

    servers = []
    for name in ("a", "b"):
        s = Serve(procs, tmp_path, name, "5s")
        s.web_port = free_port()
        s.config.write_text(s.config.read_text() + f"web:\n  listen: 127.0.0.1:{s.web_port}\n")
        servers.append(s)
    a, b = servers
    a.start()
    a.proc.wait_for_line(f"dex-web on http://127.0.0.1:{a.web_port}", 10)
    assert a.wait_ready(60) == 1
    b.start()
    b.proc.wait_for_line(f"dex-web on http://127.0.0.1:{b.web_port}", 10)
    b.proc.wait_for_line("acquiring the lease", 30)

    search = "/api/v1/dex.FlowService/SearchFlows"
    status, _, body = http("POST", f"http://127.0.0.1:{a.web_port}{search}", "{}")
    assert status == 200, body
    status, _, body = http("POST", f"http://127.0.0.1:{b.web_port}{search}", "{}")
    assert status == 503, body
    refusal = json.loads(body)
    assert refusal["code"] == "UNAVAILABLE" and "standby" in refusal["message"], refusal
    status, _, body = http("POST", f"http://127.0.0.1:{a.web_port}/api/v1/dex.AdminService/Describe",
                           "{}")
    assert status == 200 and json.loads(body)["nodeId"] == "node-m", body
    status, _, body = http("GET", f"http://127.0.0.1:{b.web_port}/api/v1/web")
    assert status == 200 and json.loads(body)["apiAddress"] == b.address, body

    # GET /api/v1/process answers on both: the standby's own account, which its API does not give.
    def process(server):
        status, _, body = http("GET", f"http://127.0.0.1:{server.web_port}/api/v1/process")
        assert status == 200, body
        return json.loads(body)

    described = json.loads(http("POST", f"http://127.0.0.1:{a.web_port}"
                                 "/api/v1/dex.AdminService/Describe", "{}")[2])
    active = process(a)
    assert active["role"] == "active" and active["serving"] is True, active
    assert active["standbyMode"] == "hot" and active["standbyState"] is None, active
    assert active["epoch"] == described["nodeEpoch"], active
    assert active["processId"] == active["holderProcessId"] == described["holderProcessId"], active
    assert int(active["logHead"]) >= 0 and active["appliedSlot"] is None, active
    deadline = time.monotonic() + 30
    while True:
        standby = process(b)
        if standby["standbyState"] == "following" and standby["epoch"] is not None:
            break
        assert time.monotonic() < deadline, f"the standby never followed: {standby}"
        time.sleep(0.2)
    assert standby["role"] == "hot-standby" and standby["serving"] is False, standby
    assert standby["phase"] == "acquiring" and standby["standbyMode"] == "hot", standby
    assert standby["epoch"] == active["epoch"], standby
    assert standby["holderProcessId"] == active["processId"] != standby["processId"], standby
    assert standby["holderIsThisProcess"] is False and standby["leaseReleased"] is False, standby
    assert 0 <= standby["lagSeconds"] < 5, standby
    assert standby["appliedSlot"] is not None and standby["logHead"] is None, standby
    assert int(standby["appliedSlot"]) <= int(process(a)["logHead"]), standby
    assert "standby" in standby["notServingReason"], standby
    assert active["processId"] in standby["notServingReason"], standby
    # Guarded as the API: a DNS-rebinding name is refused.
    req = urllib.request.Request(f"http://127.0.0.1:{b.web_port}/api/v1/process",
                                 headers={"Host": f"evil.example:{b.web_port}"})
    try:
        urllib.request.urlopen(req, timeout=10)
        raise AssertionError("a foreign Host was answered")
    except urllib.error.HTTPError as e:
        assert e.code == 403, e

    # a stops; b takes the lease over and says so, with a newer epoch and a log head of its own.
    a.proc.signal(signal.SIGTERM)
    assert a.proc.wait_exit(60) == 0, a.proc.output()
    deadline = time.monotonic() + 30
    while True:
        took = process(b)
        if took["role"] == "active" and took["serving"]:
            break
        assert time.monotonic() < deadline, f"b never took over: {took}"
        time.sleep(0.1)
    assert int(took["epoch"]) > int(active["epoch"]), took
    assert took["holderIsThisProcess"] is True and took["standbyState"] is None, took
    assert int(took["logHead"]) > int(standby["appliedSlot"]), took
