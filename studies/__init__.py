"""Studies: experiments that compare methods and write a page of docs/ (its JSON, its figures).

    study             the one runner: grid on val, bracketing, tie-break, workers, store, claims
    slices            time-boxed slices: --hours, one process a job, inputs beside the JSON, --status (no torch)
    sliced            study.run's protocol as slices' jobs (studies.matched --hours): set-up, val choice, seeds
    baselines         is MOPD worth it? every baseline of the paper and its critique (docs/baselines.md);
                      its declarations in baselines_plan, its page in baselines_page
    matched           the same question at a matched RL budget T, for several T (docs/matched.md);
                      its declarations in matched_plan, its page in matched_page
    ablations         a teacher of another origin, multi-round MOPD, UCMOPD (docs/ablations.md)
    regimes           when does MOPD help: one arm per regime, as pre-registered (docs/regimes.md);
                      its arms in regimes_arms, one method trained in regimes_train, records and decisions
                      in regimes_report, page in regimes_page
    cures             the stuck student's cures: what regimes (arm 2b) and matched (--cures) share
    findings          the findings' sentences, rendered from the studies' JSON (tools.findings checks the pages)
    teacher_headroom  stronger teachers within the course budget? a GRPO grid per domain (docs/teachers.md)
    results           the course's learning results over seeds: trains what mopd_mini.results_page renders (docs/results.md)

Each runs alone (`python -m studies.<name>`). They lived in bench/ before: a command
recorded as it ran may say `python -m bench.<name>`, and its page says the module moved. The
figures of their results that the notebooks draw are in the library (mopd_mini.views).
"""
