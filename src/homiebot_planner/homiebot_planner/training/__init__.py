"""Planner training: EMMOE trajectories -> SFT and DPO datasets -> LoRA-tuned planner checkpoints.

Modules:
    trajectory  reads an official-layout info.txt (the annotated expert trajectory of one task).
    samples     the SFT human turn / answer and the DPO rows, exactly as EMMOE.md section 6 defines them.
    build       `homiebot data build`: a whole split to sft/dpo JSON files and Hugging Face datasets.
    paraphrase  `homiebot data paraphrase`: task and analysis rewrites through an OpenAI-compatible server.
    config      TrainConfig and the paper's presets for the two stages.
    trainer     `homiebot train sft|dpo`: trl + peft LoRA training, checkpoint and model card.
    tiny        tiny models built from config (tokenizer trained locally), for tests and benchmarks.

Nothing here imports rclpy; heavy libraries (torch, transformers, trl, datasets) are imported only by the
modules that need them, so the data tools stay fast to start.
"""
