"""What is measured about the target, before anything is excused or judged: the request
prepared (`prepare.py`: options validated, target resolved and made ready, inputs bound),
autograd's backward (`backward.py`), the reference engines started (`references.py`, with
`REFERENCES`), autograd's round-off below float64 (`roundoff.py`), and the views laid out
(`gather.py`: each question put to every engine, with its raw comparison)."""
