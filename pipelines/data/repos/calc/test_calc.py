import unittest

from calc import add, mean


class CalcTest(unittest.TestCase):
    def test_add(self):
        self.assertEqual(add(2, 3), 5)

    def test_add_negative(self):
        self.assertEqual(add(-2, 3), 1)

    def test_add_floats(self):
        self.assertAlmostEqual(add(0.1, 0.2), 0.3)

    def test_mean_of_one(self):
        self.assertEqual(mean([4]), 4)

    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)


if __name__ == "__main__":
    unittest.main()
