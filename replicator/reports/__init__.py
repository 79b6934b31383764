"""Documents made from the DR history: `build_report` and `render` give one
failover, failback or drill as a self-contained, printable HTML file for auditors
(`replicator report RUN_ID --out FILE`, and the DR status page's download). It
reads the state store and the procedures' bookkeeping (`replicator.procedures`);
only the CLI and the Airflow plugin import it."""

from replicator.reports.audit import PROCEDURES, RunReport, build_report, find_run, render

__all__ = ["PROCEDURES", "RunReport", "build_report", "find_run", "render"]
