"""Benchmarks of speed and memory: scripts (not tests) that print their figures and write them to
docs/benchmarks.md, each its own section (`python -m tools.run_all` runs them all: `make bench`).

    step_vs_sft      one MOPD step vs one SFT step, tiny default
    trainer_step     the trainers' own step time (train_student, train_grpo), as they run it
    levers           the trainers' speed levers, each switched off in turn
    loss_step        one MOPD step per loss, against the exact reverse KL's
    loss_memory      naive fp32 reverse KL vs chunked reverse_kl vs topk_reverse_kl at V = 151,936
    routing          the routed teachers' outputs: mixed vs swap vs one teacher, tiny and Qwen3-1.7B size
    peers            this library against TRL's DistillationTrainer: step time, same KL; memory of teachers
    scaling          how the cost grows: N teachers on one base, longer completions, bigger batches
    stuck_gradient   the stuck student on one categorical: each loss's gradient norm
    stuck_cost       the stuck detector's share of a MOPD step, on and off, per loss form (prints only)
    bf16_floor       bf16's noise floor in MOPD's advantage: the student scored against itself
    course_stages    wall time of the course's stages on this CPU
    real_size_cpu    one MOPD step with the real Qwen3-1.7B architecture on this CPU: time, peak RSS
    gpu_h200         one MOPD step at batch 16 on one GPU, bf16 and 4-bit (`--dry-run` on a CPU)
    compare_commits  a change against an earlier commit (a git worktree): any benchmark command, both sides
    common           side-by-side timing, peak memory, the steps compared, the page's sections

Each script runs alone (`python -m bench.<name>`) and rewrites only its own section of the page.
bench/ holds benchmarks only: the studies live in studies/ (`python -m studies.<name>`), the tools
in tools/ (`python -m tools.<name>`); tests/bench/test_quoted_homes.py checks no page quotes one under bench/.
"""
