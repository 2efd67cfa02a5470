"""The folder ``python -m op_sdk.as_torchair`` puts on PYTHONPATH for the processes its
script starts (torch.multiprocessing.spawn's workers, a ``subprocess`` of Python): its
``torchair`` and ``npugraph_ex`` packages install the alias (op_sdk.as_torchair) when first
imported there and then stand for op_sdk's modules, as in the script's own process."""
