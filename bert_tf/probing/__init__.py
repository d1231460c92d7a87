"""Layer probing: which layer's frozen features serve a task best (`bert_tf.jobs.probe_layers`).

Modules: `config` (`ProbeLayersConfig`), `data` (the token and sentence files), `layer_features` (every
layer's features, cached), `feature_keys` (what the cache's arrays were computed from), `probes` (the linear
probe and the scalar mix), `child_processes` (the forward passes, scalar mixes and fine-tuning run in children),
`fine_tuned_row` (the fine-tuned reference), `report_sections` (report.json's parts) and `report` (report.md,
report.json, layers.png).
"""
