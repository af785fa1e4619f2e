"""Reads an Inspect AI log with Inspect's own reader and prints a digest.

Usage: python read_inspect_log.py LOG

Run by tests/common/inspect.rs in the pinned Inspect venv. Any warning is an
error (a log Inspect reads only with a deprecation or validation warning is
not a good log). Besides the full read, the log must also read header-only,
sample by sample and as sample summaries, each agreeing with the full read:
those are the paths Inspect's viewer and tools take. Prints one JSON object
on stdout; a failure is a traceback on stderr and a non-zero exit.
"""

import json
import sys
import warnings

warnings.simplefilter("error")

from inspect_ai.log import (  # noqa: E402
    read_eval_log,
    read_eval_log_sample,
    read_eval_log_sample_summaries,
)


def text_of(value):
    """A sample's input or a message's content as plain text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(text_of(item) or "" for item in value)
    if hasattr(value, "text") and isinstance(value.text, str):
        return value.text
    return str(value)


def score_digest(score):
    return {
        "value": score.value,
        "answer": score.answer,
        "explanation": score.explanation,
    }


def sample_digest(sample):
    return {
        "id": sample.id,
        "epoch": sample.epoch,
        "target": sample.target,
        "input": text_of(sample.input),
        "scores": {
            name: score_digest(score) for name, score in (sample.scores or {}).items()
        },
        "message_count": len(sample.messages),
        "roles": [m.role for m in sample.messages],
        "texts": [m.text for m in sample.messages],
        "output": sample.output.completion if sample.output else None,
        "metadata_keys": sorted((sample.metadata or {}).keys()),
        "model_usage": {
            model: usage.model_dump(exclude_none=True)
            for model, usage in (sample.model_usage or {}).items()
        },
        "total_time": sample.total_time,
        "working_time": sample.working_time,
        "error": sample.error.message if sample.error else None,
        "events": len(sample.events),
    }


def results_digest(results):
    if results is None:
        return None
    return {
        "total_samples": results.total_samples,
        "completed_samples": results.completed_samples,
        "scores": [
            {
                "name": score.name,
                "scorer": score.scorer,
                "metrics": {
                    name: metric.value for name, metric in score.metrics.items()
                },
            }
            for score in results.scores
        ],
    }


def digest(log):
    spec = log.eval
    dataset = spec.dataset
    return {
        "version": log.version,
        "status": log.status,
        "eval": {
            "task": spec.task,
            "model": spec.model,
            "created": spec.created,
            "dataset": {
                "name": dataset.name,
                "samples": dataset.samples,
                "sample_ids": dataset.sample_ids,
            },
            "metadata_keys": sorted((spec.metadata or {}).keys()),
            "revision": spec.revision.model_dump() if spec.revision else None,
        },
        "results": results_digest(log.results),
        "stats": {
            "started_at": log.stats.started_at,
            "completed_at": log.stats.completed_at,
        },
        "error": log.error.message if log.error else None,
        "samples": [sample_digest(s) for s in (log.samples or [])],
    }


def check_other_reads(path, log):
    """The header-only, per-sample and summary reads agree with the full one."""
    header = read_eval_log(path, header_only=True)
    assert header.samples is None, "a header-only read returned samples"
    assert header.status == log.status, (header.status, log.status)
    assert header.eval == log.eval, "the header's eval differs from the full read's"
    assert header.results == log.results, "the header's results differ"
    samples = log.samples or []
    for sample in samples:
        alone = read_eval_log_sample(path, id=sample.id, epoch=sample.epoch)
        assert alone == sample, f"sample {sample.id} epoch {sample.epoch} reads differently alone"
    summaries = read_eval_log_sample_summaries(path)
    got = sorted((str(s.id), s.epoch) for s in summaries)
    want = sorted((str(s.id), s.epoch) for s in samples)
    assert got == want, (
        f"sample summaries {got} differ from the samples {want} "
        "(the viewer lists samples from summaries.json)"
    )


def main():
    path = sys.argv[1]
    log = read_eval_log(path)
    check_other_reads(path, log)
    json.dump(digest(log), sys.stdout, default=str)
    print()


if __name__ == "__main__":
    main()
