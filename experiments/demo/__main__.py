"""`python -m experiments.demo`: the main job (see experiments/demo/__init__.py)."""

from experiments.demo import run

if __name__ == "__main__":
    run()
