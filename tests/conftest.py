import pytest
import torch as th


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Tests train tiny networks, which run faster on one thread, and the machine's cores are shared."""
    n_threads = th.get_num_threads()
    th.set_num_threads(1)
    yield
    th.set_num_threads(n_threads)
