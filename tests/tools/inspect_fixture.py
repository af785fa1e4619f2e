"""Writes a small Inspect AI log with Inspect's own API, for the tests of the
test tooling (tests/it/inspect_tools.rs): what `read_with_inspect` and
`view_bundle` must take, made by the library that defines it.

Usage: python inspect_fixture.py OUT.eval

Two samples of one task, each a system, user and assistant message, one
`match` score (C, then I), and an `accuracy` metric of 0.5. Each sample's
transcript has the events an Inspect run records: the sample's start, the
model call and the score.
"""

import sys
import warnings

warnings.simplefilter("error")

from inspect_ai.dataset import Sample  # noqa: E402
from inspect_ai.event import ModelEvent, SampleInitEvent, ScoreEvent  # noqa: E402
from inspect_ai.log import (  # noqa: E402
    EvalConfig,
    EvalDataset,
    EvalLog,
    EvalMetric,
    EvalPlan,
    EvalResults,
    EvalSample,
    EvalScore,
    EvalSpec,
    EvalStats,
    write_eval_log,
)
from inspect_ai.model import (  # noqa: E402
    ChatMessageAssistant,
    ChatMessageSystem,
    ChatMessageUser,
    GenerateConfig,
    ModelOutput,
    ModelUsage,
)
from inspect_ai.scorer import Score  # noqa: E402

MODEL = "retrace/oracle"
STARTED = "2026-01-01T00:00:00+00:00"
CASES = [
    ("math-1", "What is 2+2?", "4", "The answer is 4.", "C"),
    ("math-2", "What is 3*3?", "9", "The answer is 6.", "I"),
]


def sample(sample_id, question, target, reply, value):
    prompt = [ChatMessageSystem(content="Solve the task."), ChatMessageUser(content=question)]
    output = ModelOutput.from_content(model=MODEL, content=reply)
    score = Score(value=value, answer=reply[-2], explanation="exact match")
    events = [
        SampleInitEvent(
            timestamp=STARTED,
            working_start=0.0,
            sample=Sample(id=sample_id, input=question, target=target),
            state={},
        ),
        ModelEvent(
            timestamp=STARTED,
            working_start=0.25,
            model=MODEL,
            input=prompt,
            tools=[],
            tool_choice="none",
            config=GenerateConfig(),
            output=output,
        ),
        ScoreEvent(
            timestamp=STARTED, working_start=1.0, score=score, target=target, scorer="match"
        ),
    ]
    return EvalSample(
        id=sample_id,
        epoch=1,
        input=question,
        target=target,
        messages=[*prompt, ChatMessageAssistant(content=reply, model=MODEL)],
        output=output,
        scores={"match": score},
        metadata={"suite": "math"},
        model_usage={MODEL: ModelUsage(input_tokens=12, output_tokens=6, total_tokens=18)},
        total_time=1.5,
        working_time=1.25,
        events=events,
    )


def main():
    at = STARTED
    log = EvalLog(
        status="success",
        eval=EvalSpec(
            created=at,
            task="math",
            dataset=EvalDataset(name="math", samples=2, sample_ids=[c[0] for c in CASES]),
            model=MODEL,
            config=EvalConfig(),
            metadata={"arm": "fat"},
        ),
        plan=EvalPlan(),
        results=EvalResults(
            total_samples=2,
            completed_samples=2,
            scores=[
                EvalScore(
                    name="match",
                    scorer="match",
                    metrics={"accuracy": EvalMetric(name="accuracy", value=0.5)},
                )
            ],
        ),
        stats=EvalStats(started_at=at, completed_at="2026-01-01T00:00:03+00:00"),
        samples=[sample(*case) for case in CASES],
    )
    write_eval_log(log, sys.argv[1])


if __name__ == "__main__":
    main()
