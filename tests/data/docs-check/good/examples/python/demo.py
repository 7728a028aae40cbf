class Ops:
    # // [readme-mul-begin]
    def mul(a, b):
        return a * b
    # // [readme-mul-end]
