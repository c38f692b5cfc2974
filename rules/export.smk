rule export:
    # nsys report -> SQLite, the format the breakdown reads (profiler: nsys only).
    input:
        L.trace(LABEL, "nsys"),
    output:
        update(L.sqlite(LABEL)),
    params:
        nsys=RUN.nsys_option,
    log:
        L.log("export", LABEL),
    benchmark:
        L.benchmark("export", LABEL)
    conda:
        "../envs/analysis.yaml"
    shell:
        "embprof export {params.nsys} {input} --out {output} > {log} 2>&1"
