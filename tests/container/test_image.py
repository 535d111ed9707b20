"""The image built and run as a user runs it: healthy under its base URL path, non-root, without test tools, an upload
made in the browser still there after a restart, and a clean stop on SIGTERM."""
import re
import time
import urllib.error
import urllib.request

import pytest

from serve import free_port
from tests.conftest import runner_result
from tests.container.conftest import BASE_PATH, TITLE, podman
from tests.e2e.conftest import choose, go_to, no_exception, open_page, upload

pytestmark = pytest.mark.container
STOP_LIMIT_S = 10
APP_UID = "10001"


def test_runs_healthy_under_its_base_path_as_a_non_root_user_without_test_tools(container, image):
    assert podman("image", "inspect", "--format", "{{.Config.User}}", image).stdout.strip() == f"{APP_UID}:{APP_UID}"
    owners = podman("exec", container.id, "stat", "-c", "%u", "/proc/1", "/data", "/data/planner.duckdb")
    assert owners.stdout.split() == [APP_UID] * 3                       # the server process and the store on the volume
    with urllib.request.urlopen(container.url + "_stcore/health", timeout=5) as resp:
        assert resp.read() == b"ok"                                  # the HEALTHCHECK passed there (fixture)
    with pytest.raises(urllib.error.HTTPError, match="404"):
        urllib.request.urlopen(container.url.removesuffix(f"{BASE_PATH}/") + "_stcore/health", timeout=5)
    found = podman("exec", container.id, "python", "-c",
                   "import importlib.util as u; print([m for m in ('pytest', 'playwright', 'hypothesis') "
                   "if u.find_spec(m)])")
    assert found.stdout.strip() == "[]"


def test_a_second_planner_on_the_same_volume_is_refused_at_start(container, image):
    second = podman("run", "--detach", "--network", "host", "--volume", f"{container.volume}:/data",
                    "--env", "STREAMLIT_SERVER_ADDRESS=127.0.0.1", "--env", f"STREAMLIT_SERVER_PORT={free_port()}",
                    image).stdout.strip()
    try:
        exit_code = podman("wait", second, timeout=60).stdout.strip()
        logs = podman("logs", second)
    finally:
        podman("rm", "--force", "--time", "0", second)
    assert exit_code == "2"
    assert "Another planner is already serving /data/planner.duckdb" in logs.stdout + logs.stderr


@pytest.fixture(scope="module")
def runner_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("runner") / "results.json"
    runner_result("membw", out)
    return out


def test_an_upload_survives_a_restart_after_a_clean_sigterm_stop(container, context, runner_file):
    page = context.new_page()
    open_page(page, container.url)
    assert page.title() == TITLE
    go_to(page, "Benchmarks")
    upload(page, "membw.json", runner_file.read_bytes())
    no_exception(page)
    added = page.get_by_text(re.compile(r"Added membw\.json \(runner_json\)")).inner_text()
    run_id = re.search(r"Run ids: (run-[0-9a-f]+)", added).group(1)
    page.close()

    started = time.monotonic()
    podman("kill", "--signal", "TERM", container.id)
    exit_code = podman("wait", container.id, timeout=STOP_LIMIT_S + 5).stdout.strip()
    took = time.monotonic() - started
    print(f"stopped on SIGTERM in {took:.1f} s with exit code {exit_code}")
    assert exit_code == "0" and took < STOP_LIMIT_S, container.logs()[-2000:]

    podman("start", container.id)
    container.wait_healthy()
    page = context.new_page()
    open_page(page, container.url)
    go_to(page, "Benchmarks")
    no_exception(page)
    choose(page, "Source", "user_submitted")
    uploads = page.get_by_test_id("stDataFrame").nth(1)
    # the grid fills its cells after the run, and its cells of the unfiltered table are there until then
    uploads.locator("td", has_text=run_id).first.wait_for(state="attached")
    assert run_id in uploads.locator("td").all_inner_texts()


def test_the_images_own_address_starts_without_an_outside_request(image):
    """The image as published (STREAMLIT_SERVER_ADDRESS=0.0.0.0) in a container with no network but loopback: were
    Streamlit to look up the external IP for its banner, the log would say "Did not auto detect external IP"."""
    cid = podman("run", "--detach", "--network", "none", image).stdout.strip()
    try:
        deadline = time.monotonic() + 120
        while "URL: " not in (logs := podman("logs", cid).stdout + podman("logs", cid).stderr):
            assert podman("inspect", "--format", "{{.State.Status}}", cid).stdout.strip() == "running", logs[-3000:]
            assert time.monotonic() < deadline, logs[-3000:]
            time.sleep(0.5)
        time.sleep(2)                                      # anything Streamlit logs after the banner
        logs = podman("logs", cid).stdout + podman("logs", cid).stderr
    finally:
        podman("rm", "--force", "--time", "0", cid)
    assert "URL: http://localhost:8501" in logs and "listening on every interface" in logs
    for absent in ("External URL", "Network URL", "Did not auto detect external IP"):
        assert absent not in logs
