# fixture one-shot example
class ModelNew:
    pass
