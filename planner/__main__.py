"""``python -m planner``: the tradeoff calculator; ``python -m planner lint FILE`` checks a
launch command, systemd unit or env file against the precision policy (planner.policy.lint)."""

import sys

if __name__ == "__main__":
    argv = sys.argv[1:]
    if argv[:1] == ["lint"]:
        from planner.policy.lint import main as lint_main

        sys.exit(lint_main(argv[1:]))
    if argv[:1] == ["predict"]:
        from planner.predict import main as predict_main

        sys.exit(predict_main(argv[1:]))
    from planner.cli import main

    sys.exit(main(argv))
