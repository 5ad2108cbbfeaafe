"""dex-web served by the real `dex-server-zd dev` (docs/dex-web.md, "How it is served"): the app
and the JSON gateway on --web-listen, --no-web leaves the port closed, and an address in use
fails startup naming it; two `serve` processes with web.listen: the hot standby's gateway answers
503, the active one's 200."""
import json
import signal
import socket
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
