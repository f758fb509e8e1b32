"""Device arrays (CuPy, torch) through polygemm: a CuPy or torch user's calls on one GPU. Each result is checked
against the float64 reference, each refusal for its error type and the names it must carry. Every test here is
marked ``cuda``: without a GPU each skips for the one reason the cuda backend gives."""
