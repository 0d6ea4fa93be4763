"""The only places that use private parts of a dependency, one module per dependency, each tested."""
