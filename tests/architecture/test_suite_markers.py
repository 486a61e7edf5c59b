"""The `slow` mark (tests/conftest.py) finds the tests that stop, kill or cluster servers, by what their code does."""

from __future__ import annotations

import os
import signal

from tests.conftest import FAULT_NAMES, FAULT_WORDS, _code_names


def test_a_test_that_signals_a_process_is_slow() -> None:
    def kills() -> None:
        def later(pid: int) -> None:
            os.kill(pid, signal.SIGKILL)
        later(0)

    def reads() -> None:
        print(os.getpid())

    assert _code_names(kills) & FAULT_NAMES == {"kill", "SIGKILL"}
    assert _code_names(reads) & FAULT_NAMES == set()


def test_fault_names_are_words_not_parts_of_words() -> None:
    assert FAULT_WORDS.search("test_postgres_kill9_then_resume_equals_clean_load[from-start]")
    assert FAULT_WORDS.search("test_spooled_events_survive_a_restart")
    assert not FAULT_WORDS.search("test_evicted_reexecutes")
    assert not FAULT_WORDS.search("test_sub_workflow_drill_down")
