rule breakdown:
    # Every kernel attributed to the op:* range that launched it (DESIGN.md).
    input:
        trace=get_breakdown_trace,
        categories=ancient("config/kernel_categories.yaml"),
    output:
        opcalls="results/opcalls/opcalls__{label}.csv",
        busy="results/opcalls/opcalls__{label}.busy.json",
    params:
        code=DIGEST["breakdown"],
    log:
        "results/logs/breakdown/{label}.log",
    benchmark:
        "results/benchmarks/breakdown/{label}.tsv"
    conda:
        "../envs/analysis.yaml"
    shell:
        "python workflow/scripts/breakdown.py {input.trace} --out-dir results/opcalls"
        " --categories {input.categories} > {log} 2>&1"
