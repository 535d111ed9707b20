"""serve.py's guards without a server: the pending-upload caps per session and in total (issue 18: one session
holding large uploads turned every other user's 115-byte upload away with 413 for a minute), and the health check
that asks the store."""
import asyncio
from concurrent.futures import ThreadPoolExecutor

import pytest
from starlette.exceptions import HTTPException
from streamlit.runtime.uploaded_file_manager import UploadedFileRec

from serve import MAX_FILES_PER_SESSION, SMALL_UPLOAD_BYTES, Guard, capped_upload_manager

MIB = 2**20


def _put(manager, session: str, file_id: str, n_bytes: int) -> int:
    """The HTTP status Streamlit's upload endpoint would answer (204 when kept)."""
    try:
        manager.add_file(session, UploadedFileRec(file_id=file_id, name=f"{file_id}.bin", type="application/octet-stream",
                                                  data=b"\0" * n_bytes))
    except HTTPException as err:
        return err.status_code
    return 204


def test_one_session_cannot_fill_the_shared_total_and_small_files_always_fit():
    manager = capped_upload_manager(max_pending_bytes=4 * MIB, per_session_bytes=2 * MIB)("/upload")
    assert [_put(manager, "mallory", f"m{i}", 900_000) for i in range(4)] == [204, 204, 413, 413]   # 2 MiB each
    assert [_put(manager, f"mallory-{k}", "big", 1_900_000) for k in range(3)] == [204, 413, 413]   # the total: 4 MiB
    assert _put(manager, "alice", "result", 115) == 204                                            # issue 18's case
    assert _put(manager, "alice", "result", SMALL_UPLOAD_BYTES) == 204                             # replaces it
    assert _put(manager, "bob", "big", 1_500_000) == 413                      # larger ones count against the total


def test_replacing_a_file_counts_once_and_the_file_count_stays_capped():
    manager = capped_upload_manager(max_pending_bytes=4 * MIB, per_session_bytes=2 * MIB)("/upload")
    assert [_put(manager, "s", "same", 1_500_000) for _ in range(5)] == [204] * 5
    assert [_put(manager, "t", f"f{i}", 10) for i in range(MAX_FILES_PER_SESSION + 2)] == \
        [204] * MAX_FILES_PER_SESSION + [429, 429]


def _get(guard: Guard, path: str) -> tuple[int, bytes]:
    sent = []

    async def send(message):
        sent.append(message)

    async def receive():
        return {"type": "http.request"}
    # in a thread of its own: a session-wide Playwright fixture may already run an event loop in this one
    with ThreadPoolExecutor(1) as pool:
        pool.submit(asyncio.run, guard({"type": "http", "path": path, "headers": []}, receive, send)).result()
    return sent[0]["status"], b"".join(m.get("body", b"") for m in sent[1:])


async def _streamlit(scope, receive, send):
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": b"ok"})


@pytest.mark.parametrize("problem, expected", [(None, (200, b"ok")),
                                               ("disk full", (503, b"store unavailable: disk full"))])
def test_health_asks_the_store(problem, expected):
    guard = Guard(_streamlit, health=lambda: problem)
    assert _get(guard, "/_stcore/health") == expected
    assert _get(guard, "/planner/_stcore/health") == expected             # under a base URL path
    assert _get(guard, "/") == (200, b"ok")
    assert _get(guard, "/_stcore/metrics")[0] == 404
