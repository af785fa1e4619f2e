"""Writes a minimal valid Every Eval Ever record pair with the package's own
models, for the tests of the test tooling (tests/it/inspect_tools.rs): one
aggregate record (`<id>.json`) and its instance file (`<id>_samples.jsonl`,
one record), each built from a dict by the package's pydantic model and
dumped by it.

Usage: python eee_fixture.py OUT_DIR
"""

import json
import sys
import warnings
from pathlib import Path

warnings.simplefilter("error")

from every_eval_ever.eval_types import EvaluationLog  # noqa: E402
from every_eval_ever.instance_level_types import InstanceLevelEvaluationLog  # noqa: E402

EVALUATION_ID = "math/retrace/oracle/1767225600"
NAME = "0f8c4d52-9b0e-4c5e-8e64-2f4a1c3b7d10"

AGGREGATE = {
    "schema_version": "0.3.0",
    "evaluation_id": EVALUATION_ID,
    "retrieved_timestamp": "1767225600",
    "source_metadata": {
        "source_type": "evaluation_run",
        "source_organization_name": "retrace tests",
        "evaluator_relationship": "third_party",
    },
    "eval_library": {"name": "retrace", "version": "0.0.0"},
    "model_info": {
        "name": "oracle",
        "id": "retrace/oracle",
        "additional_details": {
            "deployment_type": "self_deployed",
            "model_availability": "unknown",
        },
    },
    "evaluation_results": [
        {
            "evaluation_result_id": "math/accuracy",
            "evaluation_name": "math",
            "source_data": {"dataset_name": "math", "source_type": "other"},
            "metric_config": {
                "metric_id": "accuracy",
                "lower_is_better": False,
                "score_type": "continuous",
                "min_score": 0,
                "max_score": 1,
            },
            "score_details": {"score": 1.0},
        }
    ],
}

INSTANCE = {
    "schema_version": "0.3.0",
    "evaluation_id": EVALUATION_ID,
    "model_id": "retrace/oracle",
    "evaluation_name": "math",
    "evaluation_result_id": "math/accuracy",
    "sample_id": "math-1",
    "interaction_type": "single_turn",
    "input": {"raw": "What is 2+2?", "reference": ["4"]},
    "output": {"raw": ["The answer is 4."]},
    "answer_attribution": [
        {
            "turn_idx": 0,
            "source": "output.raw",
            "extracted_value": "4",
            "extraction_method": "exact_match",
            "is_terminal": True,
        }
    ],
    "evaluation": {"score": 1.0, "is_correct": True},
}


def main():
    out = Path(sys.argv[1])
    out.mkdir(parents=True, exist_ok=True)
    aggregate = EvaluationLog.model_validate(AGGREGATE)
    instance = InstanceLevelEvaluationLog.model_validate(INSTANCE)
    dump = {"mode": "json", "exclude_none": True}
    (out / f"{NAME}.json").write_text(json.dumps(aggregate.model_dump(**dump), indent=2) + "\n")
    (out / f"{NAME}_samples.jsonl").write_text(json.dumps(instance.model_dump(**dump)) + "\n")


if __name__ == "__main__":
    main()
