"""Training the learned detector: labelled head views rendered from the simulator (views), the training loop
(training) and its evaluation on views of tasks it never saw (evaluation). The detector itself lives in
emmoe_core.perception, where the skills and the bridge load it."""
