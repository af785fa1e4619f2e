"""Validates Every Eval Ever records in a directory and prints every error.

Usage: python validate_eee.py DIR

Run by tests/common/eee.rs in the pinned every-eval-ever venv. Every `*.json`
under DIR is an aggregate record, checked against the package's own
`eval.schema.json`; every line of every `*.jsonl` is an instance record,
checked against `instance_level_eval.schema.json`. Each schema is applied
with jsonschema's validator for the draft the schema declares. Each file is
also given to the package's own validator (strict JSON: no NaN, no
duplicate keys; its pydantic models), and instance records must name an
aggregate record of DIR (`evaluation_id`, and `evaluation_result_id` when
given). Prints a JSON list of errors, each with file (relative to DIR), line
(for JSONL and JSON syntax), path, message and checker; an empty list when
all is valid. A directory without records is an error too.
"""

import json
import sys
import warnings
from pathlib import Path

warnings.simplefilter("error")

from jsonschema import validators  # noqa: E402
from jsonschema.exceptions import best_match  # noqa: E402

from every_eval_ever.schema import schema_json  # noqa: E402
from every_eval_ever.validator.json_utils import strict_json_loads  # noqa: E402
from every_eval_ever.validator.validation_core import (  # noqa: E402
    validate_aggregate,
    validate_instance_file,
)


def validator(name):
    schema = schema_json(name)
    cls = validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema, format_checker=cls.FORMAT_CHECKER)


def error(file, line, path, message, checker):
    return {"file": file, "line": line, "path": path, "message": message, "checker": checker}


def schema_errors(check, record, file, line):
    found = []
    for e in sorted(check.iter_errors(record), key=lambda e: list(e.absolute_path)):
        message = e.message
        if e.context:
            # oneOf/anyOf: say which branch came closest, and why it failed.
            closest = best_match(e.context)
            message += f" (closest: {closest.json_path}: {closest.message})"
        found.append(error(file, line, e.json_path, message, "jsonschema"))
    return found


def parse(text, file, line):
    try:
        return strict_json_loads(text), []
    except ValueError as e:
        at = line if line is not None else getattr(e, "lineno", None)
        return None, [error(file, at, "$", f"not strict JSON: {e}", "json")]


def package_errors(report, file):
    return [
        error(file, None, str(e.get("loc")), str(e.get("msg")), "every_eval_ever")
        for e in report.errors
    ]


def main():
    root = Path(sys.argv[1])
    aggregate, instance = validator("eval.schema.json"), validator(
        "instance_level_eval.schema.json"
    )
    errors, evaluations, results, instances = [], set(), set(), []
    aggregates = sorted(root.rglob("*.json"))
    lines_files = sorted(root.rglob("*.jsonl"))
    if not aggregates and not lines_files:
        errors.append(error(".", None, "$", "no *.json or *.jsonl records", "files"))
    for path in aggregates:
        name = str(path.relative_to(root))
        record, bad = parse(path.read_text(encoding="utf-8"), name, None)
        errors += bad
        if record is not None:
            errors += schema_errors(aggregate, record, name, None)
            if isinstance(record, dict):
                evaluations.add(record.get("evaluation_id"))
                for result in record.get("evaluation_results") or []:
                    if isinstance(result, dict) and "evaluation_result_id" in result:
                        results.add(result["evaluation_result_id"])
        errors += package_errors(validate_aggregate(path), name)
    for path in lines_files:
        name = str(path.relative_to(root))
        text = path.read_text(encoding="utf-8")
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            record, bad = parse(line, name, number)
            errors += bad
            if record is not None:
                errors += schema_errors(instance, record, name, number)
                instances.append((name, number, record))
        errors += package_errors(validate_instance_file(path), name)
    errors += cross_file_errors(evaluations, results, instances, bool(aggregates))
    json.dump(errors, sys.stdout)
    print()


def cross_file_errors(evaluations, results, instances, have_aggregates):
    """Instance records must point at an aggregate record of the directory."""
    found = []
    for name, number, record in instances:
        if not isinstance(record, dict) or not have_aggregates:
            continue
        evaluation = record.get("evaluation_id")
        if evaluation not in evaluations:
            found.append(
                error(name, number, "$.evaluation_id",
                      f"{evaluation!r} is no aggregate record's evaluation_id", "cross-file")
            )
        result = record.get("evaluation_result_id")
        if result is not None and result not in results:
            found.append(
                error(name, number, "$.evaluation_result_id",
                      f"{result!r} is no aggregate result's evaluation_result_id", "cross-file")
            )
    return found


if __name__ == "__main__":
    main()
