# From benchmark test ids to one shareable latency report (docs/DESIGN.md).
#   snakemake --cores 1 report
from snakemake.utils import min_version

min_version("9.0")


configfile: "config/config.yaml"


include: "rules/common.smk"
include: "rules/collect.smk"
include: "rules/profile.smk"
include: "rules/export.smk"
include: "rules/breakdown.smk"
include: "rules/sunburst.smk"
include: "rules/timing.smk"
include: "rules/bandwidth.smk"
include: "rules/report.smk"
include: "rules/embedding_collection.smk"


# Cheap whole-workflow steps stay on the submitting host under a cluster executor.
localrules:
    all,
    measure,
    collect,
    status,
    environment,
    aggregate,
    latency_plot,
    report,


rule all:
    default_target: True
    input:
        get_final_output(),


# Profiles, timings, per-op tables and bandwidth, without drawing anything: for
# a GPU host that has no browser; `report` then draws from the copied results/.
rule measure:
    input:
        unpack(get_measured_outputs),
