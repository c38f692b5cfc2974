# From benchmark test ids to one shareable latency report (docs/DESIGN.md).
#   snakemake --cores 1 report
# Runs from any working directory (results/ goes there) and as a Snakemake module
# (docs/USAGE.md); config/config.yaml of the working directory, else this checkout's.
import os

from snakemake.utils import min_version

min_version("9.0")


OWN_CONFIG = os.path.join(workflow.current_basedir.get_path_or_uri(secret_free=True), "config")


configfile: "config/config.yaml" if os.path.exists("config/config.yaml") else f"{OWN_CONFIG}/config.yaml"


report: "report/workflow.rst"


include: "rules/common.smk"
# One file per stage, in the order the data flows (docs/DESIGN.md, "Data flow and file contracts").
include: "rules/collect.smk"
include: "rules/profile.smk"
include: "rules/export.smk"
include: "rules/timing.smk"
include: "rules/status.smk"
include: "rules/breakdown.smk"
include: "rules/sunburst.smk"
include: "rules/aggregate.smk"
include: "rules/latency_plot.smk"
include: "rules/environment.smk"
include: "rules/peak_bandwidth.smk"
include: "rules/bandwidth.smk"
include: "rules/bandwidth_plot.smk"
include: "rules/plotly_js.smk"
include: "rules/report.smk"
include: "rules/database.smk"
include: "rules/embedding_collection.smk"


# Cheap whole-workflow steps stay on the submitting host under a cluster executor
# (`localrule: True` in each, which a module's renamed rules keep).
rule all:
    default_target: True
    localrule: True
    input:
        get_final_output(),


# Profiles, timings, per-op tables and bandwidth, without drawing anything: for
# a GPU host that has no browser; `report` then draws from the copied results/.
rule measure:
    localrule: True
    input:
        unpack(get_measured_outputs),
