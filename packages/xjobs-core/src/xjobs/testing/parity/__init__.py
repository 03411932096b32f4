"""The driver parity suite: scenarios written once against the contract, run on every backend.

Run it against any installed driver: `pytest --pyargs xjobs.testing.parity --xjobs-backend=NAME`.
"""
