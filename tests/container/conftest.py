"""The container image as teams run it: built with podman from the repository's Dockerfile and run with a volume on
/data, the DuckDB store on it. Podman, runc and debootstrap are installed with apt where missing (as root), and the
debian:bookworm-slim base image is made with debootstrap when podman lacks it (no image registry is reachable from
these machines; ../shared/reference/container-testing.md); where that cannot be done the tests are skipped with the
reason. These machines need the host network for building and running: the container listens on a free loopback
port. Every container and volume created here is removed by id at the end, and the built image through the tag of
this run's own that it was given; the base image and the installed packages are kept."""
import os
import re
import shutil
import subprocess
import time
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest

from serve import free_port
from tests.e2e.conftest import ROOT, context  # noqa: F401 (context: the e2e fixture)

BASE_IMAGE = "docker.io/library/debian:bookworm-slim"
TOOLS = {"podman": "podman", "runc": "runc", "debootstrap": "debootstrap"}     # command -> Debian package
BASE_PATH = "planner"                      # served under a base URL path, as behind a reverse proxy
TITLE = "Capacity planner (container test)"
START_TIMEOUT_S = 120
CA_BUNDLE = Path("/etc/ssl/certs/ca-certificates.crt")
ENV = {**os.environ}


def podman(*args: str, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
    """Run podman with runc and the containers.conf these machines need; fail with its stderr."""
    proc = subprocess.run(["podman", "--runtime", "runc", *args], env=ENV, capture_output=True, text=True,
                          timeout=timeout)
    if check and proc.returncode:
        pytest.fail(f"podman {' '.join(args)} exited with {proc.returncode}:\n{proc.stderr[-3000:]}")
    return proc


def _install_tools() -> None:
    missing = [pkg for cmd, pkg in TOOLS.items() if shutil.which(cmd) is None]
    if not missing:
        return
    if os.geteuid() != 0:
        pytest.skip(f"the container tests need {', '.join(missing)}: install them as root "
                    f"(apt-get install {' '.join(missing)})")
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for cmd in (["apt-get", "update", "-qq"], ["apt-get", "install", "-y", "-qq", *missing]):
        proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=900)
        if proc.returncode:
            pytest.skip(f"could not install {', '.join(missing)} ({' '.join(cmd)}): {proc.stderr[-500:]}")


def _debian_mirror() -> str:
    """The mirror apt already uses (deb822 or one-line sources), else Debian's own."""
    for path, pattern in ((Path("/etc/apt/sources.list.d/debian.sources"), r"^URIs:\s*(\S+)"),
                          (Path("/etc/apt/sources.list"), r"^deb\s+(?:\[[^]]*\]\s+)?(\S+)\s+bookworm\s")):
        if path.exists() and (found := re.search(pattern, path.read_text(), re.MULTILINE)):
            return found.group(1)
    return "http://deb.debian.org/debian"


def _make_base_image(tmp: Path) -> None:
    """debian:bookworm-slim from Debian's own packages, through the mirror apt already uses (about 30-90 s)."""
    rootfs = tmp / "rootfs"
    try:
        subprocess.run(["debootstrap", "--variant=minbase", "bookworm", str(rootfs), _debian_mirror()],
                       check=True, capture_output=True, timeout=900)
        tar = subprocess.Popen(["tar", "-C", str(rootfs), "-c", "."], stdout=subprocess.PIPE)
        imported = subprocess.run(["podman", "import", "-", BASE_IMAGE], stdin=tar.stdout, env=ENV,
                                  capture_output=True, timeout=600)
        tar.stdout.close()
        if tar.wait() or imported.returncode:
            pytest.fail(f"podman import of the debootstrap tree failed: {imported.stderr.decode()[-2000:]}")
    except subprocess.CalledProcessError as err:
        pytest.fail(f"debootstrap failed: {err.stderr.decode()[-2000:]}")
    finally:
        shutil.rmtree(rootfs, ignore_errors=True)


@pytest.fixture(scope="session")
def image(tmp_path_factory) -> str:
    """The id of the image built from the repository's Dockerfile. It is tagged with a name of this run's own and
    removed through that tag at the end: an identical image built before (every layer cached) keeps its own tags."""
    if not Path("/usr/bin/apt-get").exists():
        pytest.skip("the container tests install podman with apt (Debian)")
    _install_tools()
    tmp = tmp_path_factory.mktemp("container")
    conf = tmp / "containers.conf"
    conf.write_text("[containers]\ndefault_ulimits = []\n")    # podman's default ulimits are refused here
    ENV["CONTAINERS_CONF"] = str(conf)
    if podman("image", "exists", BASE_IMAGE, check=False).returncode:
        _make_base_image(tmp)
    iidfile, tag = tmp / "iid", f"localhost/planner-test:{uuid.uuid4().hex[:12]}"
    ca = ["-v", f"{CA_BUNDLE.parent}:/run/build-ca:ro", "--build-arg",
          f"PIP_CERT_FILE=/run/build-ca/{CA_BUNDLE.name}"] if CA_BUNDLE.exists() else []
    # docker format: the OCI image format has no HEALTHCHECK
    podman("build", "--format", "docker", "--network", "host", *ca, "--iidfile", str(iidfile), "--tag", tag,
           str(ROOT), timeout=1200)
    yield iidfile.read_text().strip().removeprefix("sha256:")
    podman("rmi", tag, timeout=300)


@dataclass
class Container:
    id: str
    url: str                 # ends with "/"
    volume: str              # the named volume on /data

    def inspect(self, fmt: str) -> str:
        return podman("inspect", "--format", fmt, self.id).stdout.strip()

    def logs(self) -> str:
        proc = podman("logs", self.id)
        return proc.stdout + proc.stderr

    def wait_healthy(self) -> None:
        """Until the image's own HEALTHCHECK passes (podman runs it on request: there is no systemd timer here)."""
        deadline = time.monotonic() + START_TIMEOUT_S
        while podman("healthcheck", "run", self.id, check=False).returncode:
            if self.inspect("{{.State.Status}}") != "running":
                pytest.fail(f"the container stopped:\n{self.logs()[-3000:]}")
            if time.monotonic() > deadline:
                pytest.fail(f"not healthy within {START_TIMEOUT_S} s:\n{self.logs()[-3000:]}")
            time.sleep(0.5)


@pytest.fixture(scope="session")
def container(image) -> Container:
    """The image running as a user runs it: a named volume on /data, a base URL path and a title; listening on a
    free loopback port (host network)."""
    port = free_port()
    volume = podman("volume", "create").stdout.strip()
    cid = None
    try:
        cid = podman("run", "--detach", "--network", "host", "--volume", f"{volume}:/data",
                     "--env", "STREAMLIT_SERVER_ADDRESS=127.0.0.1", "--env", f"STREAMLIT_SERVER_PORT={port}",
                     "--env", f"STREAMLIT_SERVER_BASE_URL_PATH={BASE_PATH}", "--env", f"APP_TITLE={TITLE}",
                     image).stdout.strip()
        running = Container(cid, f"http://127.0.0.1:{port}/{BASE_PATH}/", volume)
        running.wait_healthy()
        yield running
    finally:
        if cid:
            podman("rm", "--force", "--time", "0", cid)
        podman("volume", "rm", "--force", volume)
