"""python -m allocsim.fuzz: the differential fuzzer (allocsim.fuzz.driver)."""
from .driver import main

main()
