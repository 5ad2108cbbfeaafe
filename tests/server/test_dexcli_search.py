"""`dexcli flow search` and `dexcli flow list` against a real `dex-server-zd dev` and the
`dex-flow-examples worker`, on OrderProcessing's indexed Attributes (examples/flows/
order_processing.cc: `customer` KEYWORD, `items` INT, `total` DOUBLE, `placed-at` DATETIME as
`PlacedAt`, `tags` KEYWORD_ARRAY, all given as initial Attributes by `flow start`, and
`order-status` KEYWORD as `OrderStatus`, which its Steps write):

- queries over indexed Attributes and system fields, in JSON (one object per page) and as a
  table, with the values of `--fields`; a Step's write and a run's close found by later searches;
- pages: `--page-size` with `--page-token`, and `--all` as JSON lines (one row per line);
- `flow list` newest first, with `--status`, `--type`, `--since` and `--until`;
- errors: a bad query is the server's INVALID_ARGUMENT naming the position (exit 1, JSON on
  stderr); a bad flag exits 2 and sends nothing.
"""
import datetime
import json
import time

import pytest

from test_dexcli_flow import Dev, cli, error_of, ok_json
from test_flow_examples import worker


@pytest.fixture
def dev(procs, tmp_path):
    d = Dev(procs, tmp_path)
    worker(procs, [d.address])
    return d


def start_order(dev, flow_id, customer, items, total, placed, tags):
    return ok_json(cli(dev, "flow", "start", "OrderProcessing", "--flow-id", flow_id,
                       "--input", json.dumps({"order": flow_id}),
                       "--string", f"customer={customer}", "--int", f"items={items}",
                       "--double", f"total={total}", "--datetime", f"placed-at={placed}",
                       "--json", "tags=" + json.dumps(tags)))["runId"]


def start_orders(dev, n, prefix="o-"):
    """Orders o-1 .. o-n: customer acme (odd) or bolt (even), i items, 10.5 * i total, placed at
    10:00:0i on 2027-01-15, tagged eu, and gift when i is a multiple of 3."""
    for i in range(1, n + 1):
        start_order(dev, f"{prefix}{i}", "acme" if i % 2 else "bolt", i, 10.5 * i,
                    f"2027-01-15T10:00:0{i}Z", ["eu", "gift"] if i % 3 == 0 else ["eu"])


def search(dev, query, *args):
    return ok_json(cli(dev, "flow", "search", query, "--output", "json", *args))


def ids(page):
    return [r["flowId"] for r in page["rows"]]


def lines(r):
    assert r.returncode == 0, r.stdout + r.stderr
    return [json.loads(line) for line in r.stdout.splitlines()]


def eventually(fn, timeout=30):
    deadline = time.monotonic() + timeout
    while True:
        got = fn()
        if got:
            return got
        assert time.monotonic() < deadline, "not within %ss" % timeout
        time.sleep(0.1)


def rfc3339_now():
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="milliseconds")


def test_search_finds_runs_by_their_indexed_attributes(dev):
    start_orders(dev, 6)
    page = search(dev, "customer = 'acme'")
    assert ids(page) == ["o-5", "o-3", "o-1"], page  # newest first
    assert page["query"] == "customer = 'acme'" and page["nextPageToken"] == "", page
    assert page["appliedSlot"] > 0, page
    row = page["rows"][0]
    assert row["flowType"] == "OrderProcessing" and row["status"] == "RUNNING", row
    assert row["fields"] == {"customer": "acme"}, row  # the key the query names
    assert "closeUnixMs" not in row and row["startUnixMs"] > 0, row

    assert ids(search(dev, "items >= 3 AND total < 50 ORDER BY items ASC")) == ["o-3", "o-4"]
    assert ids(search(dev, "PlacedAt BETWEEN '2027-01-15T10:00:02Z' AND '2027-01-15T10:00:04Z' "
                           "ORDER BY PlacedAt")) == ["o-2", "o-3", "o-4"]
    assert ids(search(dev, "customer STARTS_WITH 'bo' AND NOT tags = 'gift'")) == ["o-4", "o-2"]
    gift = search(dev, "tags = 'gift'", "--fields", "customer,PlacedAt", "--fields", "total")
    assert ids(gift) == ["o-6", "o-3"], gift
    assert gift["rows"][1]["fields"] == {"PlacedAt": "2027-01-15T10:00:03.000Z",
                                         "customer": "acme", "tags": ["eu", "gift"],
                                         "total": 31.5}, gift

    # The Steps' own writes are indexed too: Ship's WaitFor writes awaiting-approval.
    eventually(lambda: len(ids(search(dev, "OrderStatus = 'awaiting-approval'"))) == 6)
    # A close, and a Step's write with it, change what later searches find.
    ok_json(cli(dev, "flow", "rpc", "o-3", "approve", "--yes", "--input", '{"seller": "s-1"}'))
    ok_json(cli(dev, "flow", "wait", "o-3", "--expect-completed"))
    done = search(dev, "Status = 'COMPLETED'", "--fields", "OrderStatus")
    assert ids(done) == ["o-3"], done
    assert done["rows"][0]["fields"] == {"OrderStatus": "shipped"}, done
    assert done["rows"][0]["closeUnixMs"] >= done["rows"][0]["startUnixMs"], done
    assert ids(search(dev, "customer = 'acme' AND Status = 'RUNNING'")) == ["o-5", "o-1"]

    # The table: a column per index key the rows carry.
    table = cli(dev, "flow", "search", "customer = 'bolt'", "--fields", "items")
    assert table.returncode == 0, table.stderr
    head, *body = table.stdout.splitlines()
    assert head.split()[:8] == ["FLOW", "ID", "RUN", "ID", "TYPE", "STATUS", "STARTED", "TOOK"], head
    assert head.split()[-2:] == ["customer", "items"], head
    assert [line.split()[0] for line in body] == ["o-6", "o-4", "o-2"], table.stdout
    assert body[0].split()[-2:] == ["bolt", "6"], body


def test_pages_with_page_tokens_and_all_pages_as_json_lines(dev):
    start_orders(dev, 7)
    query = "FlowType = 'OrderProcessing'"
    first = search(dev, query, "--page-size", "3")
    assert ids(first) == ["o-7", "o-6", "o-5"] and first["nextPageToken"], first
    second = search(dev, query, "--page-size", "3", "--page-token", first["nextPageToken"])
    assert ids(second) == ["o-4", "o-3", "o-2"] and second["nextPageToken"], second
    last = search(dev, query, "--page-size", "3", "--page-token", second["nextPageToken"])
    assert ids(last) == ["o-1"] and last["nextPageToken"] == "", last
    # A token names its query.
    other = error_of(cli(dev, "flow", "search", "customer = 'acme'", "--page-token",
                         first["nextPageToken"]), 1)
    assert other["grpcCode"] == "INVALID_ARGUMENT", other

    rows = lines(cli(dev, "flow", "search", query, "--all", "--output", "json", "--page-size", "2"))
    assert [r["flowId"] for r in rows] == [f"o-{i}" for i in range(7, 0, -1)], rows
    assert all(r["status"] == "RUNNING" and r["flowType"] == "OrderProcessing" for r in rows)
    # --all from a token: the rest.
    rest = lines(cli(dev, "flow", "search", query, "--all", "--output", "json", "--page-size", "3",
                     "--page-token", first["nextPageToken"]))
    assert [r["flowId"] for r in rest] == ["o-4", "o-3", "o-2", "o-1"], rest
    table = cli(dev, "flow", "search", query, "--all", "--page-size", "2")
    assert table.returncode == 0 and "\n7 runs\n" in table.stdout, table.stdout + table.stderr
    one = cli(dev, "flow", "search", query, "--page-size", "2")
    assert "more with --page-token" in one.stdout, one.stdout


def test_list_is_newest_first_filtered_by_status_type_and_start_time(dev):
    start_orders(dev, 2, prefix="early-")
    time.sleep(0.05)
    between = rfc3339_now()
    time.sleep(0.05)
    start_orders(dev, 3)
    ok_json(cli(dev, "flow", "start", "SignUp", "--flow-id", "s-1", "--input",
                '{"email": "ann@example.com", "code": "c-7"}'))
    ok_json(cli(dev, "flow", "rpc", "o-1", "approve", "--yes", "--input", '{"seller": "s-1"}'))
    ok_json(cli(dev, "flow", "wait", "o-1", "--expect-completed"))
    o2_run = ok_json(cli(dev, "flow", "describe", "o-2"))["runId"]
    ok_json(cli(dev, "flow", "stop", "o-2", "--run-id", o2_run, "--yes"))

    everything = ok_json(cli(dev, "flow", "list", "--output", "json"))
    assert everything["query"] == "ORDER BY StartTime DESC", everything
    assert ids(everything) == ["s-1", "o-3", "o-2", "o-1", "early-2", "early-1"], everything

    def listed(*args):
        return ids(ok_json(cli(dev, "flow", "list", "--output", "json", *args)))

    assert listed("--status", "completed") == ["o-1"]
    assert listed("--status", "canceled,completed") == ["o-2", "o-1"]
    assert listed("--status", "RUNNING", "--type", "OrderProcessing") == ["o-3", "early-2",
                                                                          "early-1"]
    assert listed("--type", "SignUp") == ["s-1"]
    assert listed("--type", "SignUp,OrderProcessing", "--status", "failed") == []
    assert listed("--since", between) == ["s-1", "o-3", "o-2", "o-1"]
    assert listed("--until", between) == ["early-2", "early-1"]
    assert listed("--since", "1h", "--type", "OrderProcessing", "--status", "running") == [
        "o-3", "early-2", "early-1"]
    all_rows = lines(cli(dev, "flow", "list", "--all", "--output", "json", "--page-size", "4"))
    assert [r["flowId"] for r in all_rows] == ids(everything)

    table = cli(dev, "flow", "list", "--status", "completed,canceled")
    assert table.returncode == 0, table.stderr
    body = table.stdout.splitlines()[1:]
    assert [line.split()[0] for line in body] == ["o-2", "o-1"], table.stdout
    assert "CANCELED" in body[0] and "COMPLETED" in body[1], table.stdout
    empty = cli(dev, "flow", "list", "--status", "timed-out")
    assert empty.returncode == 0 and empty.stdout == "no runs\n", empty.stdout


def test_a_bad_query_is_the_servers_invalid_argument_and_a_bad_flag_exits_2(dev):
    start_orders(dev, 1)
    e = error_of(cli(dev, "flow", "search", "customer = "), 1)
    assert e["kind"] == "request" and e["operation"] == "flow search", e
    assert e["grpcCode"] == "INVALID_ARGUMENT", e
    assert e["message"].startswith("query: at position 12: expected a literal"), e
    unknown = error_of(cli(dev, "flow", "search", "colour = 'red'", "--all", "--output", "json"), 1)
    assert "unknown field 'colour'" in unknown["message"], unknown
    assert "customer" in unknown["message"], unknown  # the index keys in use
    typed = error_of(cli(dev, "flow", "search", "items = 'three'"), 1)
    assert typed["grpcCode"] == "INVALID_ARGUMENT" and "items" in typed["message"], typed

    for args, words in [(["search", "x", "--page-size", "5000"], "--page-size"),
                        (["search", "x", "--output", "yaml"], "--output must be table or json"),
                        (["list", "--status", "finished"], "'finished' is not a run status"),
                        (["list", "--since", "last week"], "--since: 'last week'")]:
        e = error_of(cli(dev, "flow", *args), 2)
        assert e["kind"] == "usage" and words in e["message"], (args, e)
    # A write the index cannot take is refused naming the Attribute, before anything is indexed.
    bad = error_of(cli(dev, "flow", "start", "OrderProcessing", "--flow-id", "o-bad", "--json",
                       'tags={"a": 1}'), 1)
    assert bad["grpcCode"] == "INVALID_ARGUMENT" and "tags" in bad["message"], bad
    assert ids(search(dev, "FlowId = 'o-bad'")) == []
