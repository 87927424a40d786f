"""``python -m planner``: the tradeoff calculator; ``python -m planner lint FILE`` checks a
launch command, systemd unit or env file against the precision policy (planner.policy.lint);
``python -m planner predict`` predicts one layout (planner.predict)."""

import sys


def run(argv: list[str]) -> int:
    """The verb ``argv`` names (none: the calculator), its exit code."""
    if argv[:1] == ["lint"]:
        from planner.policy.lint import main as lint_main

        return lint_main(argv[1:])
    if argv[:1] == ["predict"]:
        from planner.predict import main as predict_main

        return predict_main(argv[1:])
    from planner.cli import main

    return main(argv)


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
