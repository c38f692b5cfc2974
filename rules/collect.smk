checkpoint collect:
    # Which configs exist is only known by asking pytest, so the DAG below it
    # is built after this has run (never at parse time).
    output:
        table="results/configs.tsv",
    params:
        preset=config["preset"],
        selection=get_collect_options(),
        code=DIGEST["measured"],
    log:
        "results/logs/collect.log",
    benchmark:
        "results/benchmarks/collect.tsv"
    conda:
        "../envs/benchmark.yaml"
    shell:
        "python workflow/scripts/collect.py --preset {params.preset}"
        " {params.selection} --out {output.table} > {log} 2>&1"
