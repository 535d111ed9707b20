"""The server's log keeps what an operator reads: Streamlit's line for each late poll of a progress bar that a full
rerun removed (ui/components.py _poll) is dropped. Under issue 18's starving load (benchmarks/load_test.py, 4 links,
12 questions, 3 users) they were 433 of the log's 478 lines, in bursts of identical lines as the browsers' 0.3 s
timers went on while the full reruns were drawn."""
import inspect
import logging

from streamlit.runtime import app_session

from ui import components          # noqa: F401  (installs the filter, as every page does)


class _Kept(logging.Handler):
    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines = []

    def emit(self, record):
        self.lines.append(record.getMessage())


def test_late_fragment_polls_are_dropped_and_the_modules_other_lines_kept():
    source = inspect.getsource(app_session.AppSession.request_rerun)
    assert '"The fragment with id %s does not exist anymore - "' in source      # the line Streamlit logs, at INFO
    logger = logging.getLogger("streamlit.runtime.app_session")
    kept, level = _Kept(), logger.level
    logger.addHandler(kept)
    logger.setLevel(logging.DEBUG)
    try:
        logger.info("The fragment with id %s does not exist anymore - it might have been removed during a preceding "
                    "full-app rerun.", "901594194cdee562db4e2c16da3bc660")
        logger.info("AppSession shut down (id=%s)", "abc")
        logger.warning("The fragment with id %s does not exist anymore", "f00")     # a warning is never dropped
    finally:
        logger.removeHandler(kept)
        logger.setLevel(level)
    assert kept.lines == ["AppSession shut down (id=abc)", "The fragment with id f00 does not exist anymore"]
