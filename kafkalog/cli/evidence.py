"""`kafkalog evidence build` and `evidence verify`."""

from __future__ import annotations

import sys

from .options import add_input, add_quiet, read_file
from .output import EXIT_OK, EXIT_PROBLEMS, save_report
from .purge import _add_ledger_options, _verify


def _add_evidence(commands) -> None:
    p = commands.add_parser(
        "evidence", help="build a signed (Ed25519) evidence report of a purge run from its ledger, or verify one"
    )
    actions = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    build = actions.add_parser(
        "build", help="the report of a run (default: the latest), with the verification of the copies"
    )
    _add_ledger_options(
        build,
        run_help="the run to report (default: the latest); --verify then looks for its keys alone "
        "(without --run: every run's)",
    )
    build.add_argument(
        "--verify",
        nargs="+",
        metavar="LOG_DIR",
        help="verify these copies now (as verify-purge) and put the result in the report; without it the report "
        "says it was not verified",
    )
    add_input(build, "--signing-key", required=True, metavar="PEM", help="the Ed25519 private key (PKCS#8 PEM)")
    build.add_argument("--output", required=True, metavar="FILE", help="the signed report, JSON")
    build.add_argument("--markdown", metavar="FILE", help="also the report as Markdown")
    build.add_argument("--master", default=None, help="Spark master (default: local[2], or the session's)")
    build.add_argument("--verbose", action="store_true", help="show Spark's own error logs on stderr")
    add_quiet(build)
    build.set_defaults(run=_run_evidence_build)
    check = actions.add_parser("verify", help="check a report's signature with the signer's public key")
    add_input(check, "report", metavar="REPORT", help="the signed report (JSON)")
    add_input(check, "--public-key", required=True, metavar="PEM", help="the Ed25519 public key (PEM)")
    check.add_argument("--markdown", action="store_true", help="print the verified report as Markdown")
    check.set_defaults(run=_run_evidence_verify)


def _run_evidence_build(args) -> int:
    from ..operations.evidence import build_report, render_markdown, sign_report, signing_key
    from ..storage.fs import LogFileSystem

    key = read_file(args.signing_key)
    signing_key(key)  # the key and the run checked before a JVM starts
    build_report(args.ledger, args.run_id)
    check = _verify(args, args.verify) if args.verify else None
    signed = sign_report(build_report(args.ledger, args.run_id, check=check), key)
    save_report(args.output, signed)
    if args.markdown:
        fs, path = LogFileSystem.for_path(args.markdown)
        fs.write_bytes(path, render_markdown(signed).encode("utf-8"))
    verdict = "not verified" if check is None else check.summary()
    print(f"evidence of run {signed['report']['run']['runId']} signed into {args.output}; {verdict}")
    return EXIT_OK if check is None or check.clean else EXIT_PROBLEMS


def _run_evidence_verify(args) -> int:
    from ..operations.evidence import SignatureMismatch, read_signed, render_markdown, verify_report

    data, public_key = read_file(args.report), read_file(args.public_key)
    try:
        signed = read_signed(data, args.report)
        report = verify_report(signed, public_key)
    except SignatureMismatch as err:  # the check's answer (exit 1), not a failure to check (exit 2)
        print(f"kafkalog evidence verify: {err}", file=sys.stderr)
        return EXIT_PROBLEMS
    if args.markdown:
        print(render_markdown(signed), end="")
    else:
        print(f"the signature holds: run {report['run']['runId']} of ledger {report['ledger']}, signed by this key")
    return EXIT_OK
