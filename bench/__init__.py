"""Benchmarks: scripts (not tests) that print their figures and write them to docs/benchmarks.md.

    run_all          every CPU benchmark below, in order; rewrites the page (`make bench`)
    step_vs_sft      one MOPD step vs one SFT step, tiny default
    routing          routed teacher scoring: mixed vs swap vs one teacher, tiny and Qwen3-1.7B size
    loss_memory      naive fp32 reverse KL vs chunked reverse_kl vs topk_reverse_kl at V = 151,936
    peers            this library against TRL's DistillationTrainer: step time, same KL; memory of teachers
    compare_commits  a change against an earlier commit (a git worktree): any benchmark command, both sides
    course_stages    wall time of the course's stages on this CPU
    real_size_cpu    one MOPD step with the real Qwen3-1.7B architecture on this CPU: time, peak RSS
    gpu_h200         one MOPD step at batch 16 on one GPU, bf16 and 4-bit (`--dry-run` on a CPU)
    common           the machine, side-by-side timing, peak memory, the steps compared, the page

Each script runs alone (`python -m bench.<name>`) and rewrites only its own section of the page.
"""
