// A source with a marked block, shown in README.md and docs/guide/index.md.
// [readme-add-begin]
int add(int a, int b) {
  return a + b;
}
// [readme-add-end]

int main() { return add(1, -1); }
