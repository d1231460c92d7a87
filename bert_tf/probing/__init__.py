"""Layer probing: which layer's frozen features serve a task best (`bert_tf.jobs.probe_layers`).

Modules: `data` (the token and sentence files), `layer_features` (every layer's features, cached),
`probes` (the linear probe and the scalar mix), `report` (report.md, report.json, layers.png).
"""
