rule export:
    # nsys report -> SQLite, the format the breakdown reads (profiler: nsys only).
    input:
        RESULTS.trace(LABEL, "nsys"),
    output:
        update(RESULTS.sqlite(LABEL)),
    params:
        nsys=RUN.nsys_option,
    log:
        RESULTS.log("export", LABEL),
    benchmark:
        RESULTS.benchmark("export", LABEL)
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof export {params.nsys} {input} --out {output} > {log} 2>&1"
