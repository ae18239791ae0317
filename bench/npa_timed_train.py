"""nnue-pytorch's ``train.py``, unchanged, with one more callback: the step clock of
``step_timer.py`` (wall, CPU, load average at each step's end); for ``nnue bench train_vs_npa``.

Run with nnue-pytorch's interpreter from its source folder, which must be on PYTHONPATH (it
imports ``train`` from there; ``step_timer.py`` is found beside this file, the folder Python puts
first for a script):

    cd NPA/src && PYTHONPATH=NPA/src NPA/venv/bin/python /path/to/bench/npa_timed_train.py \
        --clock-out FILE --clock-warmup W [train.py's arguments]

(``nnue bench train_vs_npa`` and ``learn_vs_npa`` do so: ``npa_env``.)

Its ``SimpleTrainer`` calls a callback's ``on_train_epoch_start``, ``on_train_batch_end`` and
``on_train_end`` when the object has them; nothing else of nnue-pytorch is touched.
"""
import sys

from step_timer import StepClock


def _take(argv: list, flag: str) -> str:
    i = argv.index(flag)
    value = argv[i + 1]
    del argv[i:i + 2]
    return value


def main() -> None:
    argv = sys.argv[1:]
    out, warmup = _take(argv, "--clock-out"), int(_take(argv, "--clock-warmup"))
    batch = int(argv[argv.index("--batch-size") + 1])
    import train   # nnue-pytorch's
    from trainer.engine import SimpleTrainer

    class Callback:
        def __init__(self):
            self.clock = StepClock(out, warmup, batch)

        def on_train_epoch_start(self, trainer):
            self.clock.start()

        def on_train_batch_end(self, trainer, batch_=None, batch_idx=None, outputs=None):
            self.clock.step_end()

        def on_train_end(self, trainer):
            self.clock.write()

    class Timed(SimpleTrainer):
        def __init__(self, *a, **kw):
            super().__init__(*a, **kw)
            self.callbacks.append(Callback())

    train.SimpleTrainer = Timed
    sys.argv = ["train.py"] + argv
    train.main()


if __name__ == "__main__":
    main()
