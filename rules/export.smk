rule export:
    # nsys report -> SQLite, the format the breakdown reads (profiler: nsys only).
    input:
        "results/traces/{label}.nsys-rep",
    output:
        "results/sqlite/{label}.sqlite",
    params:
        nsys=NSYS_ARG,
    log:
        "results/logs/export/{label}.log",
    benchmark:
        "results/benchmarks/export/{label}.tsv"
    conda:
        "../envs/analysis.yaml"
    shell:
        "python workflow/scripts/export.py {params.nsys} {input} --out {output} > {log} 2>&1"
