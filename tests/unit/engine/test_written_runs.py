"""What memory answers of where records were written (`WrittenRuns`), and what it
leaves to a read of the target."""

from __future__ import annotations

from replicator.engine.written_runs import MAX_RUNS, Answer, WrittenRuns

KEY = ("orders", 0)


def _runs(*acks: tuple[int, int, int, int], committed: bool = True) -> WrittenRuns:
    runs = WrittenRuns()
    runs.track(KEY)
    for first, last, count, target in acks:
        runs.acknowledged(KEY, first, last, count, target, committed=committed)
    return runs


def test_a_run_of_consecutive_records_answers_every_position_inside_it() -> None:
    # 0 alone (the first record: only itself is known), then 1..99 following it.
    runs = _runs((0, 0, 1, 10), (1, 99, 99, 109))
    assert runs.answers(KEY, [0, 50, 99], high=110) == [
        Answer(True, 10, 100),
        Answer(True, 60, 100),
        Answer(True, 109, 100),
    ]


def test_the_position_after_the_copy_is_exact_and_those_past_it_are_for_the_source() -> None:
    runs = _runs((0, 0, 1, 0), (1, 9, 9, 9))
    right_after, past = runs.answers(KEY, [10, 15], high=10)
    assert right_after == Answer(True, 10, 10)
    assert past == Answer(False, 10, 10)  # exact only if the source has no record 10..14


def test_a_partition_written_elsewhere_now_answers_only_what_was_written_here() -> None:
    runs = _runs((0, 0, 1, 0), (1, 9, 9, 9))
    runs.release(KEY)
    assert runs.answers(KEY, [5, 10, 15], high=10) == [Answer(True, 5, 10), None, None]


def test_a_gap_on_either_side_starts_a_new_run_known_from_its_last_record() -> None:
    # 0..4 at 0..4; a transaction marker at target 5: 5..9 at 6..10 (a run of 5 records
    # whose first target offset the acknowledgement does not say but its last's).
    runs = _runs((0, 0, 1, 0), (1, 4, 4, 4), (5, 9, 5, 10))
    assert runs.answers(KEY, [4, 5, 8, 9], high=11) == [
        Answer(True, 4, 10),
        None,  # read: inside a run whose start is not known
        None,
        Answer(True, 10, 10),
    ]
    # A source gap (compaction): 12 follows 9, written at 11.
    runs.acknowledged(KEY, 10, 12, 1, 11, committed=True)
    assert runs.answers(KEY, [10, 11, 12], high=12) == [None, None, Answer(True, 11, 13)]


def test_a_target_that_lost_the_newest_record_answers_nothing() -> None:
    runs = _runs((0, 0, 1, 0), (1, 9, 9, 9))
    assert runs.answers(KEY, [5], high=9) == [None]  # truncated or recreated


def test_going_back_on_either_side_forgets_the_runs_before() -> None:
    runs = _runs((0, 0, 1, 100), (1, 9, 9, 109))
    runs.restart(KEY)
    runs.acknowledged(KEY, 3, 3, 1, 2, committed=True)  # target recreated: offsets anew
    assert runs.answers(KEY, [1, 3], high=3) == [None, Answer(True, 2, 4)]


def test_a_resume_does_not_continue_the_run_before_it() -> None:
    runs = _runs((0, 0, 1, 0), (1, 4, 4, 4))
    runs.restart(KEY)
    runs.acknowledged(KEY, 5, 9, 5, 9, committed=True)  # looks contiguous: not trusted
    assert runs.answers(KEY, [2, 6, 9], high=10) == [Answer(True, 2, 10), None, Answer(True, 9, 10)]


def test_exactly_once_runs_count_once_committed_and_never_if_rolled_back() -> None:
    runs = _runs((0, 0, 1, 0), committed=False)
    assert runs.answers(KEY, [0], high=1) == [None]
    runs.committed(KEY)
    assert runs.answers(KEY, [0], high=1) == [Answer(True, 0, 1)]
    runs.acknowledged(KEY, 1, 5, 5, 5, committed=False)
    runs.rolled_back(KEY)
    runs.acknowledged(KEY, 1, 5, 5, 9, committed=False)  # retried after the abort
    runs.committed(KEY)
    assert runs.answers(KEY, [3, 5], high=10) == [None, Answer(True, 9, 6)]


def test_each_partition_keeps_its_newest_runs() -> None:
    runs = WrittenRuns()
    runs.track(KEY)
    for n in range(MAX_RUNS + 10):  # every record after a marker: a run each
        runs.acknowledged(KEY, 2 * n, 2 * n, 1, 2 * n, committed=True)
    oldest_kept = 2 * 10
    assert runs.answers(KEY, [0, oldest_kept], high=10**6) == [
        None,
        Answer(True, 20, 2 * (MAX_RUNS + 9) + 1),
    ]
