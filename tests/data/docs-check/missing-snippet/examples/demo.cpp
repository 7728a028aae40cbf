// [readme-add-begin]
int add(int a, int b) {
  return a + b;
}
// [readme-add-end]

// [readme-sub-begin]
int sub(int a, int b) { return a - b; }
// [readme-sub-end]
