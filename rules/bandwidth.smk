rule peak_bandwidth:
    # The device's peak memory bandwidth, measured by a large copy where the
    # records' device is present, else its datasheet value (labelled so).
    # Measured once per results folder (delete the file to measure again):
    # new records of the same device must not re-run every config's bandwidth.
    input:
        records=ancient("results/benchmark_results.json"),
    output:
        "results/peak_bandwidth.json",
    params:
        code=DIGEST["peak_bandwidth"],
    log:
        "results/logs/peak_bandwidth.log",
    benchmark:
        "results/benchmarks/peak_bandwidth.tsv"
    conda:
        "../envs/benchmark.yaml"
    shell:
        "python workflow/scripts/peak_bandwidth.py --records {input.records} --force"
        " --out {output} > {log} 2>&1"


rule bandwidth:
    # Achieved GB/s and % of peak per op (formulas in config/bandwidth.yaml).
    input:
        opcalls="results/opcalls/opcalls__{label}.csv",
        record="results/timing/{label}.json",
        peak="results/peak_bandwidth.json",
    output:
        "results/bandwidth/bandwidth__{label}.csv",
    params:
        code=DIGEST["bandwidth"],
    log:
        "results/logs/bandwidth/{label}.log",
    benchmark:
        "results/benchmarks/bandwidth/{label}.tsv"
    conda:
        "../envs/analysis.yaml"
    shell:
        "python workflow/scripts/bandwidth.py {input.opcalls} --record {input.record}"
        " --peak {input.peak} --out {output} > {log} 2>&1"
