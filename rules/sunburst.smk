rule sunburst:
    input:
        opcalls="results/opcalls/opcalls__{label}.csv",
        code=get_code_files("sunburst"),
    output:
        png="results/sunburst/{label}.png",
        html="results/sunburst/{label}.html",
    params:
        code=DIGEST["sunburst"],
    log:
        "results/logs/sunburst/{label}.log",
    benchmark:
        "results/benchmarks/sunburst/{label}.tsv"
    conda:
        "../envs/report.yaml"
    shell:
        "python workflow/scripts/sunburst.py --opcalls {input.opcalls}"
        " --png {output.png} --html {output.html} > {log} 2>&1"
